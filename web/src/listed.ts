// How a page says what a limited list holds: every list the daemon cut
// says its total and that it was cut ("Showing 10 of 12 ..."), from the
// answer's total, limit and truncated (docs/api.md).
import { count } from "./format";

/** n with its noun in the number it takes ("1 event", "12 events"). */
export function counted(n: number, noun: string, many = `${noun}s`): string {
  return `${count(n)} ${n === 1 ? noun : many}`;
}

/** "Showing 10 of 12 link directions the job's traffic crosses." when
 * shown < total, else "All 12 link directions ..." ("The only ..." for
 * one, "No ..." for none); what follows the noun is `of`. */
export function listedText(shown: number, total: number, noun: string, of: string, many = `${noun}s`): string {
  const tail = of ? ` ${of}` : "";
  if (shown < total) return `Showing ${count(shown)} of ${counted(total, noun, many)}${tail}.`;
  if (total === 0) return `No ${many}${tail}.`;
  if (total === 1) return `The only ${noun}${tail}.`;
  return `All ${counted(total, noun, many)}${tail}.`;
}
