#!/usr/bin/env python3
"""The PyTorch peer of bench/cuda_throughput.cu: the same networks (torchvision's ResNet-50 at
224x224; ResNet-18 with the CIFAR stem from torchvision_free_models.py at 32x32), batch and SGD step
on the GPU, timed the same way (one untimed step, then the median of up to STEPS steps or
MAX_SECONDS, each to cudaDeviceSynchronize), as PyTorch runs fastest: cuDNN with
cudnn.benchmark, channels_last, and for fp16 torch.autocast with a GradScaler (AMP). fp32 runs
without TF32 (cudnn.allow_tf32 and matmul.allow_tf32 off), IEEE float like ptrain's fp32.
Prints one line per configuration in bench/cuda_throughput's form (impl=pytorch), with the GPU
memory: torch's peak allocated and reserved bytes and the device's used memory.
Usage: torch_cuda_peer.py MODEL:PRECISION[,MODEL:PRECISION...] [BATCH [STEPS [MAX_SECONDS]]]
  e.g. torch_cuda_peer.py resnet50:fp16,resnet50:fp32,resnet18_cifar:fp32 128 10 20
Without a GPU: "no CUDA device found" on stderr, exit 2."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def mib(n):
    return n / (1024.0 * 1024.0)


def make_model(name):
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(num_classes=1000), (3, 224, 224), 1000
    import torchvision_free_models as zoo
    return zoo.resnet18_cifar(10), (3, 32, 32), 10


def run(torch, name, precision, batch, steps, max_seconds):
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    model, shape, classes = make_model(name)
    model = model.cuda().to(memory_format=torch.channels_last)
    x = torch.randn(batch, *shape, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp = precision == "fp16"
    scaler = torch.amp.GradScaler("cuda", enabled=amp)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        torch.cuda.synchronize()

    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    times = []
    timing = time.perf_counter()
    while not times or (len(times) < steps and time.perf_counter() - timing < max_seconds):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    median = statistics.median_low(times)
    free, total = torch.cuda.mem_get_info()
    print(f"bench=cuda_throughput model={name} precision={precision} impl=pytorch torch={torch.__version__} "
          f"cudnn={torch.backends.cudnn.version()} channels_last=1 cudnn_benchmark=1 tf32=0 "
          f"gpu={torch.cuda.get_device_name(0).replace(' ', '_')} batch={batch} steps={len(times)} "
          f"first_step_s={first:.3f} median_ms={1e3 * median:.2f} images_per_sec={batch / median:.1f} "
          f"peak_allocated_mib={mib(torch.cuda.max_memory_allocated()):.0f} "
          f"peak_reserved_mib={mib(torch.cuda.max_memory_reserved()):.0f} device_used_mib={mib(total - free):.0f}",
          flush=True)
    del model, x, y, opt


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    configs = [c.split(":") for c in argv[1].split(",")]
    for c in configs:
        if len(c) != 2 or c[0] not in ("resnet50", "resnet18_cifar") or c[1] not in ("fp32", "fp16"):
            print(f"torch_cuda_peer.py: '{':'.join(c)}': expected resnet50|resnet18_cifar:fp32|fp16", file=sys.stderr)
            return 64
    batch = int(argv[2]) if len(argv) > 2 else 128
    steps = int(argv[3]) if len(argv) > 3 else 10
    max_seconds = float(argv[4]) if len(argv) > 4 else 30.0
    try:
        import torch
    except ImportError as e:
        print(f"torch_cuda_peer.py: no torch in {sys.executable}: {e}", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_cuda_peer.py: no CUDA device found (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    failed = 0
    for name, precision in configs:
        try:
            run(torch, name, precision, batch, steps, max_seconds)
        except Exception as e:  # out of memory, a missing torchvision: that line says so, the others run
            reason = str(e).replace("\n", " ")
            print(f"bench=cuda_throughput model={name} precision={precision} impl=pytorch batch={batch} "
                  f"status=error note={reason}", flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
