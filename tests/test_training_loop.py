"""The one training loop: gradients from autograd or a custom routine, callbacks, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.training import fit, map_parallel


def _quadratic_problem():
    model = nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    target = torch.tensor([[1.0, -2.0, 0.5]])
    return model, target


def test_gradient_descent_on_a_quadratic_matches_the_closed_form():
    """L = ½||w − t||², so each SGD step gives w ← w − lr (w − t): w_n = t (1 − (1 − lr)^n)."""
    model, target = _quadratic_problem()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hist = fit(model, lambda s: None, steps=20, optimizer=opt, loss_fn=lambda m, _: 0.5 * ((m.weight - target) ** 2).sum())
    assert_book_close(model.weight.detach(), target * (1 - 0.9**20))
    expected_losses = [0.5 * float(((target * (1 - 0.9**n) - target) ** 2).sum()) for n in range(20)]
    assert_book_close(hist.losses, expected_losses, rtol=1e-6)


def test_custom_backward_routine_is_used():
    model, target = _quadratic_problem()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)

    def backward(m, _):
        m.weight.grad = m.weight.detach() - target  # the closed-form gradient
        return 0.0

    fit(model, lambda s: None, steps=1, optimizer=opt, backward=backward)
    assert_book_close(model.weight.detach(), target)


def test_callback_runs_before_updates_and_after_the_last():
    model, target = _quadratic_problem()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    seen = []
    hist = fit(model, lambda s: None, steps=4, optimizer=opt, loss_fn=lambda m, _: 0.5 * ((m.weight - target) ** 2).sum(),
               callback=lambda step, m, loss: seen.append(step) or {"w0": float(m.weight.detach()[0, 0])}, callback_steps=[0, 2])
    assert seen == [0, 2, 4] and [r["step"] for r in hist.records] == [0, 2, 4]
    assert hist.records[0]["w0"] == 0.0


@pytest.mark.parametrize("steps", [0, -5, 2.5])
def test_bad_step_counts_are_rejected(steps):
    model, target = _quadratic_problem()
    with pytest.raises(ValueError, match="steps must be"):
        fit(model, lambda s: None, steps=steps, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=lambda m, _: m.weight.sum())


def test_divergence_is_reported():
    model, target = _quadratic_problem()
    with pytest.raises(FloatingPointError, match="lower the learning rate"):
        fit(model, lambda s: None, steps=200, optimizer=torch.optim.SGD(model.parameters(), lr=5.0),
            loss_fn=lambda m, _: ((m.weight - target) ** 2).sum() * 1e30)


def test_exactly_one_gradient_source():
    model, _ = _quadratic_problem()
    with pytest.raises(ValueError, match="exactly one"):
        fit(model, lambda s: None, steps=1, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))


def test_map_parallel_keeps_job_order():
    jobs = [{"x": float(i)} for i in range(5)]
    assert map_parallel(abs_neg, jobs, processes=2) == [float(i) for i in range(5)]
    assert map_parallel(abs_neg, jobs, processes=1) == [float(i) for i in range(5)]


def abs_neg(x: float) -> float:
    return abs(-x)


def _transformer_run(fast: bool, compile: bool = False, steps: int = 6) -> np.ndarray:
    from attention_dynamics.models import CausalTransformer
    from attention_dynamics.training import fast_adamw, fast_training_path

    torch.manual_seed(0)
    model = CausalTransformer(n_out=3, vocab_size=7, d_model=16, n_layers=2, n_heads=2, max_len=12)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, 7, (4, 12), generator=g), torch.randint(0, 3, (4, 12), generator=g)) for _ in range(steps)]
    if fast:
        fast_training_path(model, compile=compile)
        opt = fast_adamw(model.parameters(), lr=1e-2)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def loss_fn(m, batch):
        return nn.functional.cross_entropy(m(batch[0]).reshape(-1, 3), batch[1].reshape(-1))

    return fit(model, lambda step: batches[0], steps=steps, optimizer=opt, loss_fn=loss_fn, grad_clip=1.0).losses  # one batch: the loss must fall


def test_fast_path_without_compile_gives_the_eager_losses():
    """Fused attention and fused AdamW: the same losses as the explicit attention and AdamW's loop, within float tolerance."""
    eager, fast = _transformer_run(False), _transformer_run(True)
    assert np.max(np.abs(eager - fast)) < 1e-5
    assert eager[-1] < eager[0] - 1e-2  # the run moved


def test_fast_path_keeps_the_modules_state_dict_keys():
    from attention_dynamics.models import CausalTransformer
    from attention_dynamics.training import fast_training_path

    model = CausalTransformer(n_out=3, vocab_size=7, d_model=16, n_layers=1, n_heads=2, max_len=12)
    keys = list(model.state_dict())
    fast_training_path(model)
    assert list(model.state_dict()) == keys
    assert all(a.fused for a in model.attention_modules())


@pytest.mark.slow
def test_compiled_fast_path_gives_the_eager_losses_and_repeats_itself():
    eager, fast, again = _transformer_run(False), _transformer_run(True, compile=True), _transformer_run(True, compile=True)
    assert np.max(np.abs(eager - fast)) < 1e-5
    np.testing.assert_array_equal(fast, again)


def _noisy_regression(seed: int = 0):
    """A small model trained on fresh noisy batches drawn from its own generator, with AdamW and a schedule."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + 0.1 * s))
    generator = torch.Generator().manual_seed(seed + 1)

    def batches(_step):
        x = torch.randn(16, 4, generator=generator)
        return x, x.sum(-1, keepdim=True) + 0.1 * torch.randn(16, 1, generator=generator)

    def loss_fn(m, batch):
        return ((m(batch[0]) - batch[1]) ** 2).mean()

    return model, optimizer, scheduler, generator, batches, loss_fn


def _resumable_run(path, *, crash_at=None, steps=30):
    from attention_dynamics.training import ResumePoint, fit_resumable

    model, optimizer, scheduler, generator, batches, loss_fn = _noisy_regression()

    def record(step, m):
        if crash_at is not None and step == crash_at:
            raise KeyboardInterrupt("the session stopped")
        return {"weight_norm": float(m[0].weight.norm())}

    history = fit_resumable(model, batches, steps=steps, optimizer=optimizer, scheduler=scheduler, loss_fn=loss_fn,
                            resume=ResumePoint(path=path, every=10, record=record), generator=generator)
    return model, history


def test_a_resumed_run_is_bit_for_bit_the_run_that_never_stopped(tmp_path):
    whole, whole_history = _resumable_run(tmp_path / "a.pt")
    with pytest.raises(KeyboardInterrupt):
        _resumable_run(tmp_path / "b.pt", crash_at=20)  # dies after saving step 10, while measuring step 20
    assert torch.load(tmp_path / "b.pt", weights_only=True)["done"] == 10
    resumed, resumed_history = _resumable_run(tmp_path / "b.pt")
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
    np.testing.assert_array_equal(whole_history.losses, resumed_history.losses)
    assert [r["step"] for r in resumed_history.records] == [0, 10, 20, 30]
    assert [r["weight_norm"] for r in resumed_history.records] == [r["weight_norm"] for r in whole_history.records]


def test_a_resumable_run_is_the_plain_loop_when_nothing_stops_it(tmp_path):
    _, history = _resumable_run(tmp_path / "a.pt")
    model, optimizer, scheduler, generator, batches, loss_fn = _noisy_regression()
    plain = fit(model, batches, steps=30, optimizer=optimizer, scheduler=scheduler, loss_fn=loss_fn)
    np.testing.assert_array_equal(history.losses, plain.losses)


def test_a_resume_file_from_a_run_of_another_length_is_refused(tmp_path):
    _resumable_run(tmp_path / "a.pt", steps=20)
    with pytest.raises(ValueError, match="holds a run of 20 steps"):
        _resumable_run(tmp_path / "a.pt", steps=30)


def _fake_cgroup_v2(tmp_path, limits):
    """A cgroup v2 tree: /sys/fs/cgroup/<a>/<b>, with cpu.max per level (None: no file)."""
    root = tmp_path / "cgroup"
    group = root
    for name, limit in limits:
        group = group / name if name else group
        group.mkdir(parents=True, exist_ok=True)
        if limit is not None:
            (group / "cpu.max").write_text(limit + "\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("0::/" + "/".join(n for n, _ in limits if n) + "\n")
    return root, proc


def test_cgroup_v2_quota_is_the_tightest_on_the_path(tmp_path):
    from attention_dynamics.training import cgroup_cpu_limit

    root, proc = _fake_cgroup_v2(tmp_path, [("", "max 100000"), ("kubepods", "400000 100000"), ("pod", "150000 100000")])
    assert cgroup_cpu_limit(root, proc) == 1.5
    root, proc = _fake_cgroup_v2(tmp_path / "none", [("", "max 100000"), ("user.slice", None)])
    assert cgroup_cpu_limit(root, proc) is None


def test_cgroup_v1_quota(tmp_path):
    from attention_dynamics.training import cgroup_cpu_limit

    group = tmp_path / "cgroup" / "cpu,cpuacct" / "docker" / "abc"
    group.mkdir(parents=True)
    (group / "cpu.cfs_quota_us").write_text("200000\n")
    (group / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "proc"
    proc.write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")
    assert cgroup_cpu_limit(tmp_path / "cgroup", proc) == 2.0
    (group / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_limit(tmp_path / "cgroup", proc) is None


def test_worker_pools_are_sized_by_the_quota_not_the_host(tmp_path, monkeypatch):
    """A Binder-like pod: the host has 16 cores, the process may use all 16, the pod's quota is 1 CPU."""
    import attention_dynamics.training.loop as loop

    root, proc = _fake_cgroup_v2(tmp_path, [("", "max 100000"), ("pod", "100000 100000")])
    monkeypatch.setattr(loop.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(loop.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    real = loop.cgroup_cpu_limit
    monkeypatch.setattr(loop, "cgroup_cpu_limit", lambda: real(root, proc))
    assert loop.usable_cpus() == 1
    monkeypatch.setattr(loop.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(loop, "cgroup_cpu_limit", lambda: None)
    assert loop.usable_cpus() == 2, "without a quota the affinity mask decides"
    monkeypatch.setattr(loop, "cgroup_cpu_limit", lambda: 0.5)
    assert loop.usable_cpus() == 1, "never below one"
    started = []

    class NoPool:  # map_parallel with a quota of one CPU runs in-process: no pool is started
        def __init__(self, *args, **kwargs):
            started.append(kwargs)

    monkeypatch.setattr(loop, "ProcessPoolExecutor", NoPool)
    assert loop.map_parallel(_square, [dict(x=2), dict(x=3)]) == [4, 9]
    assert not started


def _square(x):
    return x * x
