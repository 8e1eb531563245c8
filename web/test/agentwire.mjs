// Encodes agent datagrams (proto/netloom/agent/v1/agent.proto) for tests
// that feed the daemon's agent socket directly, without an MPI job: the
// fields those tests use, by the field numbers of agent.proto. The daemon
// decodes them with the real schema, so a wrong number here shows as
// wrong figures, never as a passing test.
import { createSocket } from "node:dgram";

// Field number and type per message: u (varint, Number or BigInt), s
// (string), b (bool), d (double), or the name of a message type; a type
// in brackets is repeated.
const SCHEMA = {
  Datagram: {
    version: [1, "u"], job_id: [2, "s"], rank: [3, "u"], world_size: [4, "u"], seq: [5, "u"], chunk: [6, "u"], chunks: [7, "u"],
    time_unix_ns: [8, "u"], final: [9, "b"], start_unix_ns: [10, "u"], process: [11, "Process"], functions: [12, ["FunctionStat"]],
    interval_ns: [17, "u"], gpu: [22, "Gpu"], reorders: [23, ["Reorder"]],
  },
  Reorder: {
    index: [1, "u"], time_unix_ns: [2, "u"], ranks: [3, "u"], comm_world: [4, "b"], nodes: [5, "u"], method: [6, "s"], moved: [7, "u"],
    old_rank: [8, "u"], new_rank: [9, "u"], inter_node_before: [10, "u"], inter_node_after: [11, "u"], total_bytes: [12, "u"], since: [13, "s"],
    seconds: [14, "d"], map_seconds: [15, "d"],
  },
  Process: { node: [1, "s"], host: [2, "s"], pid: [3, "u"], mpi_library: [5, "s"], program: [6, "s"], user: [7, "s"], cpu_user_seconds: [10, "d"], wall_seconds: [12, "d"], mpi_seconds: [13, "d"] },
  FunctionStat: { name: [1, "s"], calls: [2, "u"], time_ns: [3, "u"], bytes_sent: [4, "u"], bytes_received: [5, "u"] },
  Traffic: { bytes: [1, "u"], msgs: [2, "u"] },
  Gpu: {
    probed: [1, "b"], probe_error: [2, "s"], functions: [3, ["GpuFunction"]], peers: [4, ["GpuPeer"]], nccl_ops: [5, ["NcclOp"]],
    nccl_version: [6, "s"], nccl_profiler_interface: [7, "u"], nccl_peers: [8, ["NcclPeer"]], nccl_net_events: [9, "b"],
  },
  BufferKinds: { pageable: [1, "Traffic"], pinned: [2, "Traffic"], device: [3, "Traffic"], managed: [4, "Traffic"] },
  GpuFunction: { name: [1, "s"], send: [2, "BufferKinds"], recv: [3, "BufferKinds"] },
  GpuPeer: { peer: [1, "u"], sent_from: [2, "BufferKinds"], received_into: [3, "BufferKinds"] },
  NcclOp: { comm: [1, "u"], comm_rank: [2, "u"], comm_size: [3, "u"], name: [4, "s"], algorithm: [5, "s"], protocol: [6, "s"], calls: [7, "u"], bytes: [8, "u"], time_ns: [9, "u"] },
  NcclPeer: { comm: [1, "u"], peer: [2, "u"], sent: [3, "Traffic"], received: [4, "Traffic"] },
};

function varint(v) {
  let x = BigInt(v);
  if (x < 0n) throw new Error(`agentwire: negative varint ${v}`);
  const out = [];
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x > 0n) b |= 0x80;
    out.push(b);
  } while (x > 0n);
  return out;
}

const tag = (num, wire) => varint((num << 3) | wire);

/** Encodes obj as the message type `type`. */
export function encode(type, obj) {
  const fields = SCHEMA[type];
  if (!fields) throw new Error(`agentwire: no message ${type}`);
  const out = [];
  for (const [name, v] of Object.entries(obj)) {
    if (v === undefined || v === null) continue;
    const f = fields[name];
    if (!f) throw new Error(`agentwire: ${type} has no field ${name}`);
    const [num, kind] = f;
    const values = Array.isArray(kind) ? v : [v];
    const t = Array.isArray(kind) ? kind[0] : kind;
    for (const x of values) {
      switch (t) {
        case "u":
          out.push(...tag(num, 0), ...varint(x));
          break;
        case "b":
          out.push(...tag(num, 0), x ? 1 : 0);
          break;
        case "d": {
          const b = new DataView(new ArrayBuffer(8));
          b.setFloat64(0, x, true);
          out.push(...tag(num, 1), ...new Uint8Array(b.buffer));
          break;
        }
        case "s": {
          const b = new TextEncoder().encode(x);
          out.push(...tag(num, 2), ...varint(b.length), ...b);
          break;
        }
        default: {
          const b = encode(t, x);
          out.push(...tag(num, 2), ...varint(b.length), ...b);
        }
      }
    }
  }
  return Uint8Array.from(out);
}

/** Sends datagrams (objects of the Datagram schema) to the daemon's agent
 * socket at 127.0.0.1:port, one after the other. */
export async function sendDatagrams(port, datagrams) {
  const s = createSocket("udp4");
  try {
    for (const d of datagrams) {
      await new Promise((ok, fail) => s.send(encode("Datagram", d), port, "127.0.0.1", (err) => (err ? fail(err) : ok())));
    }
  } finally {
    s.close();
  }
}
