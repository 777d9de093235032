#!/usr/bin/python3
"""The PyTorch peer of bench/data_parallel's weak scaling: the CIFAR ResNet-18 trained on random
data at --batch images per process, SGD with momentum, 1 thread per process. First one process
alone (no DDP), then --world processes under DistributedDataParallel over gloo on loopback
(MASTER_ADDR=127.0.0.1, a free port). Each figure is the median over --steps timed steps (after
--warmup) of the slowest process's step time. Prints one JSON line per figure (--name: the peer's
name, e.g. pytorch_pip; default pytorch):
  {"impl": NAME | NAME + "_ddp_gloo", "ranks": N, "batch_per_rank": B, "median_s": ..., "images_per_sec": ...,
   "torch": version}
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torchvision_free_models as resnet  # noqa: E402  (beside this file)


def step_times(model, batch, warmup, steps, seed, barrier=None):
    torch.manual_seed(seed)
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for i in range(warmup + steps):
        if barrier:
            barrier()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        elapsed = time.perf_counter() - start
        if barrier:  # the slowest process's time
            t = torch.tensor([elapsed], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            elapsed = t.item()
        if i >= warmup:
            times.append(elapsed)
    return statistics.median(times)


def ddp_worker(rank, world, port, args, results):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(resnet.resnet18_cifar(10).train())
    median = step_times(model, args.batch, args.warmup, args.steps, seed=99 + rank, barrier=dist.barrier)
    if rank == 0:
        results.put(median)
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report(impl, ranks, batch, median):
    print(json.dumps({"impl": impl, "ranks": ranks, "batch_per_rank": batch, "median_s": median,
                      "images_per_sec": ranks * batch / median, "torch": torch.__version__}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--name", default="pytorch")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    report(args.name, 1, args.batch, step_times(resnet.resnet18_cifar(10).train(), args.batch, args.warmup,
                                                args.steps, seed=99))

    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.start_processes(ddp_worker, args=(args.world, free_port(), args, results), nprocs=args.world,
                       start_method="spawn")
    report(args.name + "_ddp_gloo", args.world, args.batch, results.get())


if __name__ == "__main__":
    main()
