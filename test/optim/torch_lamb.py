"""LAMB (optim/lamb.hpp), which torch.optim lacks: the algorithm as You et al. and NVIDIA's FusedLAMB
compute it (Adam's bias-corrected moments, decoupled weight decay, the per-parameter trust ratio
|p| / |update|). Used by make_references.py and bench/torch_albert_peer.py."""
import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, no_decay=()):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.no_decay = set(id(p) for p in no_decay)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                update = (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + group["eps"])
                if id(p) not in self.no_decay:
                    update = update + group["weight_decay"] * p
                w_norm, u_norm = p.norm(), update.norm()
                trust = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
                p.sub_(group["lr"] * trust * update)
