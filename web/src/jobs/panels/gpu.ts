// The GPU side: buffers' paths between host and device memory, and NCCL
// operations; each panel hidden for a job without it (and for a daemon
// that does not serve it).
import { ApiError, get } from "../../api";
import { h, panel } from "../../dom";
import type { GpuSummary } from "../api";
import { jobPath } from "../api";
import { buffersView, hasBuffers, hasNccl, ncclView } from "../gpu";
import { message } from "./context";
import type { JobContext, JobPanel } from "./context";

export function gpuPanels(ctx: JobContext): JobPanel & { buffers: HTMLElement; nccl: HTMLElement } {
  const { id, signal } = ctx;
  const gpuBox = h("div", {}, "");
  const ncclBox = h("div", {}, "");
  const gpuPanel = panel("GPU buffers: paths between host and device memory", gpuBox);
  const ncclPanel = panel("NCCL operations", ncclBox);
  gpuPanel.classList.add("gpu-panel");
  ncclPanel.classList.add("nccl-panel");
  gpuPanel.hidden = ncclPanel.hidden = true;
  const load = async () => {
    try {
      const r = await get<{ gpu: GpuSummary }>(jobPath(id, "/gpu"), { pairs: 0 }, signal);
      gpuPanel.hidden = !hasBuffers(r.gpu.buffers);
      ncclPanel.hidden = !hasNccl(r.gpu.nccl);
      if (!gpuPanel.hidden) gpuBox.replaceChildren(buffersView(r.gpu.buffers));
      if (!ncclPanel.hidden) ncclBox.replaceChildren(ncclView(r.gpu.nccl));
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof ApiError && (err.status === 404 || err.status === 405)) return;
      gpuPanel.hidden = false;
      gpuBox.replaceChildren(h("div", { class: "state error" }, `GPU figures unavailable: ${message(err)}`));
    }
  };
  return { buffers: gpuPanel, nccl: ncclPanel, load };
}
