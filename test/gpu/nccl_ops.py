"""The GPU check's NCCL job (test/gpu/run.sh): one PyTorch rank on the one
GPU issues collectives of known sizes through NCCL, with Netloom's NCCL
profiler plugin loaded (NCCL_PROFILER_PLUGIN). test/gpu/gpu_test.go,
TestNCCL, compares the plugin's profile with these:

  3 x all_reduce of 1 Mi float32   (4 MiB each)
  2 x broadcast of 256 Ki float32  (1 MiB each)
  1 x all_gather_into_tensor of 64 Ki float32 per rank (256 KiB)
"""
import os

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
rank = int(os.environ.get("RANK", "0"))
world = int(os.environ.get("WORLD_SIZE", "1"))
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
for _ in range(3):
    dist.all_reduce(x)
y = torch.ones(1 << 18, device="cuda")
for _ in range(2):
    dist.broadcast(y, 0)
z = torch.ones(1 << 16, device="cuda")
out = torch.empty((1 << 16) * world, device="cuda")
dist.all_gather_into_tensor(out, z)
torch.cuda.synchronize()
print(f"rank {rank} sum {x.sum().item():.0f} {y.sum().item():.0f} {out.sum().item():.0f}")
dist.destroy_process_group()
