package store

import (
	"fmt"
	"strconv"
)

// GPU is a rank's GPU side as its agent last reported it (docs/gpu.md):
// the kinds of the buffers its MPI calls named, when the process had CUDA
// loaded, and its NCCL operations, from the NCCL profiler plugin. Like the
// function rows, every counter is cumulative and the latest snapshot's
// section stands for the rank.
type GPU struct {
	// Probed: the CUDA driver was asked the kind of every buffer. False:
	// Functions and Peers are empty (ProbeError says why, when CUDA was
	// loaded and probing failed).
	Probed     bool          `json:"probed"`
	ProbeError string        `json:"probe_error,omitempty"`
	Functions  []GPUFunction `json:"functions,omitempty"`
	// Peers are sorted by peer rank, each once.
	Peers []GPUPeer `json:"peers,omitempty"`

	NCCLOps               []NCCLOp   `json:"nccl_ops,omitempty"`
	NCCLVersion           string     `json:"nccl_version,omitempty"`
	NCCLProfilerInterface uint32     `json:"nccl_profiler_interface,omitempty"`
	NCCLPeers             []NCCLPeer `json:"nccl_peers,omitempty"`
	// NCCLNetEvents: NCCL's network transport reported network events,
	// from which NCCLPeers' bytes come.
	NCCLNetEvents bool `json:"nccl_net_events,omitempty"`
}

// BufferKinds is traffic by where the buffer's memory lives.
type BufferKinds struct {
	Pageable Traffic `json:"pageable"` // host memory CUDA does not know
	Pinned   Traffic `json:"pinned"`   // host memory pinned by CUDA
	Device   Traffic `json:"device"`   // device memory
	Managed  Traffic `json:"managed"`  // managed (unified) memory
}

// OnHost is the pageable and pinned traffic: the H of a path.
func (k BufferKinds) OnHost() Traffic { return k.Pageable.Add(k.Pinned) }

// OnDevice is the device and managed traffic: the D of a path.
func (k BufferKinds) OnDevice() Traffic { return k.Device.Add(k.Managed) }

// Add returns k + o.
func (k BufferKinds) Add(o BufferKinds) BufferKinds {
	return BufferKinds{k.Pageable.Add(o.Pageable), k.Pinned.Add(o.Pinned), k.Device.Add(o.Device), k.Managed.Add(o.Managed)}
}

// Total is the sum over kinds.
func (k BufferKinds) Total() Traffic { return k.OnHost().Add(k.OnDevice()) }

// GPUFunction is the kinds of the buffers one MPI function named.
type GPUFunction struct {
	Name string      `json:"name"`
	Send BufferKinds `json:"send"` // the buffers it sent from
	Recv BufferKinds `json:"recv"` // the buffers it received into
}

// GPUPeer is a rank's traffic with one peer world rank by its own buffer
// kind: what it sent to the peer and what it received from it.
type GPUPeer struct {
	Peer         int         `json:"peer"`
	SentFrom     BufferKinds `json:"sent_from"`
	ReceivedInto BufferKinds `json:"received_into"`
}

// NCCLOp is one NCCL operation of a rank in one communicator, with one
// algorithm and protocol (empty where NCCL did not report them).
type NCCLOp struct {
	Comm      CommHash `json:"comm"`
	CommRank  uint32   `json:"comm_rank"`
	CommSize  uint32   `json:"comm_size"`
	Name      string   `json:"name"`
	Algorithm string   `json:"algorithm,omitempty"`
	Protocol  string   `json:"protocol,omitempty"`
	Calls     uint64   `json:"calls"`
	Bytes     uint64   `json:"bytes"`
	TimeNS    uint64   `json:"time_ns"`
}

// NCCLPeer is the network traffic a rank's NCCL exchanged with one peer
// of a communicator (Peer is the rank in the communicator).
type NCCLPeer struct {
	Comm     CommHash `json:"comm"`
	Peer     uint32   `json:"peer"`
	Sent     Traffic  `json:"sent"`
	Received Traffic  `json:"received"`
}

// CommHash is NCCL's communicator hash. It is written as 16 hex digits:
// as a JSON number it would lose its low bits in a browser.
type CommHash uint64

// String is the hash as 16 hex digits.
func (c CommHash) String() string { return fmt.Sprintf("%016x", uint64(c)) }

// MarshalText writes the hash as 16 hex digits.
func (c CommHash) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads the hex digits MarshalText wrote.
func (c *CommHash) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 16, 64)
	if err != nil {
		return fmt.Errorf("communicator hash %q: want up to 16 hex digits", b)
	}
	*c = CommHash(v)
	return nil
}
