# Prints the PyTorch 1.13 reference values embedded in test/optim/*_test.cpp (the tests do not
# run Python). Run with the interpreter that has torch: /usr/bin/python3 make_references.py
import warnings

import torch
from torch.optim import lr_scheduler as L

from torch_lamb import Lamb

warnings.simplefilter("ignore")


def fmt(v):
    return "{" + ", ".join(fmt(x) if isinstance(x, list) else repr(x) for x in v) + "}"


# Optimizers: p minimises 0.5 * sum(a p^2) - b.p (g = a p - b); q gets g = 3 q + 1 on even
# steps only and has no gradient (skipped) on odd ones. p and q after each of 4 steps.
def quadratic(make, steps=4, dtype=torch.float64):
    p = torch.tensor([1.0, -2.0, 0.5], dtype=dtype, requires_grad=True)
    q = torch.tensor([0.25, -0.75], dtype=dtype, requires_grad=True)
    opt = make([p, q])
    a = torch.tensor([1.0, 0.5, 2.0], dtype=dtype)
    b = torch.tensor([0.1, -0.3, 0.2], dtype=dtype)
    ps, qs = [], []
    for k in range(steps):
        opt.zero_grad(set_to_none=True)
        p.grad = (a * p - b).detach()
        if k % 2 == 0:
            q.grad = 3 * q.detach() + 1
        opt.step()
        ps.append(p.detach().tolist())
        qs.append(q.detach().tolist())
    return ps, qs


optimizers = {
    "sgd_plain": lambda ps: torch.optim.SGD(ps, lr=0.1),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd_dampening": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "sgd_weight_decay": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.8, weight_decay=0.05),
    "sgd_nesterov_wd": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.1),
    "adam_wd": lambda ps: torch.optim.Adam(ps, lr=0.1, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1),
    "adam_amsgrad": lambda ps: torch.optim.Adam(ps, lr=0.1, betas=(0.9, 0.5), amsgrad=True),
    "adam_no_amsgrad": lambda ps: torch.optim.Adam(ps, lr=0.1, betas=(0.9, 0.5)),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.1),
    "adamw_amsgrad": lambda ps: torch.optim.AdamW(ps, lr=0.05, betas=(0.9, 0.5), weight_decay=0.3, amsgrad=True),
}
for name, make in optimizers.items():
    ps, qs = quadratic(make)
    print(f"{name}: p = {fmt(ps)}\n{name}: q = {fmt(qs)}")

# float32: p alone, 4 steps.
for name, make in {
    "adamw_float32": lambda ps: torch.optim.AdamW(ps, lr=0.1, weight_decay=0.1),
    "sgd_nesterov_float32": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
}.items():
    ps, _ = quadratic(lambda params: make(params[:1]), dtype=torch.float32)
    print(f"{name}: p = {fmt(ps[-1])}")


# Schedules: param_groups[0]['lr'] (and momentum or beta1) before each scheduler.step().
def schedule(make_opt, make_sched, n, momentum=None):
    p = torch.zeros(1, requires_grad=True)
    opt = make_opt([p])
    s = make_sched(opt)
    lrs, ms = [], []
    for k in range(n):
        g = opt.param_groups[0]
        lrs.append(g["lr"])
        if momentum == "momentum":
            ms.append(g["momentum"])
        if momentum == "beta1":
            ms.append(g["betas"][0])
        if k < n - 1:
            opt.step()
            s.step()
    return lrs, ms


sgd = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)
adam = lambda ps: torch.optim.Adam(ps, lr=0.1)
schedules = {
    "step_lr": (sgd, lambda o: L.StepLR(o, step_size=3, gamma=0.5), 10, None),
    "cosine": (sgd, lambda o: L.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 25, None),
    "one_cycle_cos": (sgd, lambda o: L.OneCycleLR(o, max_lr=0.1, total_steps=20), 21, "momentum"),
    "one_cycle_linear": (adam, lambda o: L.OneCycleLR(
        o, max_lr=0.01, total_steps=15, pct_start=0.4, anneal_strategy="linear", div_factor=10,
        final_div_factor=100, base_momentum=0.8, max_momentum=0.9), 16, "beta1"),
    "one_cycle_three_phase": (sgd, lambda o: L.OneCycleLR(
        o, max_lr=0.2, total_steps=30, pct_start=0.25, three_phase=True), 31, "momentum"),
    "warmup_step_lr": (sgd, lambda o: L.ChainedScheduler(
        [L.LinearLR(o, start_factor=0.25, total_iters=4), L.StepLR(o, step_size=3, gamma=0.5)]), 10, None),
    "linear_lr": (sgd, lambda o: L.LinearLR(o, start_factor=0.5, total_iters=5), 8, None),
}
for name, (make_opt, make_sched, n, momentum) in schedules.items():
    lrs, ms = schedule(make_opt, make_sched, n, momentum)
    print(f"{name}: lr = {fmt(lrs)}")
    if ms:
        print(f"{name}: {momentum} = {fmt(ms)}")


# LAMB (torch_lamb.py) in float64 on the quadratic run: p is named like a weight (decayed), q like a
# bias (no weight decay).


for name, kwargs in {
    "lamb": dict(lr=0.1),
    "lamb_wd": dict(lr=0.05, betas=(0.8, 0.9), eps=1e-4, weight_decay=0.3),
}.items():
    ps, qs = quadratic(lambda params: Lamb(params, no_decay=params[1:], **kwargs))
    print(f"{name}: p = {fmt(ps)}\n{name}: q = {fmt(qs)}")

# Warm-up then linear decay (optim/schedule.hpp's WarmupLinearDecay): HuggingFace's
# get_linear_schedule_with_warmup, a LambdaLR.
warmup, total = 4, 10
lrs, _ = schedule(sgd, lambda o: L.LambdaLR(
    o, lambda s: s / max(1, warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup))), 13)
print(f"warmup_linear_decay: lr = {fmt(lrs)}")
