// Ports as their fabric names them: an Ethernet port by its interface name
// ("leaf1 swp1"), an InfiniBand port by its number ("leaf1:2"), which has
// no other. The number stays in the detail (portDetail, link ids, URLs).
import type { PortRef } from "./api";

/** A link's ends with their names, as the API gives every link. */
export interface NamedEnds {
  a: PortRef;
  b: PortRef;
  a_name?: string;
  b_name?: string;
}

const same = (p: PortRef, q: PortRef) => p.guid === q.guid && p.port === q.port;

/** The name the fabric gives port p, an end of link l; "" where it has
 * only its number. */
export function endName(l: NamedEnds | undefined, p: PortRef): string {
  if (!l) return "";
  if (same(l.a, p)) return l.a_name ?? "";
  if (same(l.b, p)) return l.b_name ?? "";
  return "";
}

/** A port for people: "leaf1 swp1" where it has a name, else "leaf1:2". */
export const portLabel = (node: string, port: number, name?: string): string => (name ? `${node} ${name}` : `${node}:${port}`);

/** A port with its number in words: "leaf1 swp1 (port 2)", "leaf1 port 2". */
export const portDetail = (node: string, port: number, name?: string): string => (name ? `${node} ${name} (port ${port})` : `${node} port ${port}`);

/** A port of a node, after the node's name: "swp1", or "port 2". */
export const portOnly = (port: number, name?: string): string => (name ? name : `port ${port}`);

/** A link direction as its ends are named: "leaf1 swp1 → spine1 swp3",
 * "leaf1:2 → spine1:1"; the names from the row's own link, or l. */
export function dirLabel(
  x: { from: PortRef; to: PortRef; from_description?: string; to_description?: string; from_name?: string; to_name?: string; link?: NamedEnds },
  l: NamedEnds | undefined = x.link,
): string {
  const from = x.from_name ?? endName(l, x.from);
  const to = x.to_name ?? endName(l, x.to);
  return `${portLabel(x.from_description || x.from.guid, x.from.port, from)} → ${portLabel(x.to_description || x.to.guid, x.to.port, to)}`;
}
