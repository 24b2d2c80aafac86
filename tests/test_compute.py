"""The one command for stored results (compute): the list, a computation through each launcher, a failing job that
leaves the others' outputs and a second run that resumes without running them again, promotion to data/, the command
line's checks, its --root, and the SLURM options through submitit's debug executor."""

from __future__ import annotations

import importlib
import json
import os
import re
from pathlib import Path

import pytest
import torch

from attention_dynamics.book import cli, compute
from attention_dynamics.ledger.results import Job, StoredData, StoredResult

TESTS_DIR = Path(__file__).resolve().parent


# --------------------------------------------------------------------------------------------
# A small stored result whose jobs count their calls in files and can be made to fail
# --------------------------------------------------------------------------------------------


def counted_job(name: str, counter_dir: str, fail_if: str = "") -> dict:
    """Write one line to ``<counter_dir>/<name>.calls`` (a call, whatever the process), then fail if the file
    ``fail_if`` exists, else return the job's output."""
    with open(Path(counter_dir) / f"{name}.calls", "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
    if fail_if and Path(fail_if).exists():
        raise RuntimeError(f"job {name} failed on purpose")
    return {"name": name, "square": len(name) ** 2}


def _calls(counter_dir: Path) -> dict[str, int]:
    return {p.stem: len(p.read_text().splitlines()) for p in sorted(counter_dir.glob("*.calls"))}


def fake_result(counter_dir: Path, fail_flag: Path) -> StoredResult:
    """Three jobs (``a``, ``bb``, ``ccc``); ``ccc`` fails while ``fail_flag`` exists. Assembles ``fake.json``."""

    def jobs(scale, seeds=None):
        kw = {"counter_dir": str(counter_dir)}
        return [Job("a", counted_job, {"name": "a", **kw}), Job("bb", counted_job, {"name": "bb", **kw}, cost=2.0),
                Job("ccc", counted_job, {"name": "ccc", **kw, "fail_if": str(fail_flag)}, cost=3.0)]

    def assemble(scale, outputs, folder):
        (folder / "fake.json").write_text(json.dumps({"scale": scale, "outputs": dict(outputs)}, sort_keys=True))
        (folder / "sub").mkdir(exist_ok=True)
        (folder / "sub" / "note.txt").write_text(f"scale {scale}\n")

    return StoredResult(name="fake", chapter="none", about="a test result", files=("fake.json", "sub/note.txt"),
                        scales=("fast", "book"), committed_scale="book", expected={"fast": "3 jobs", "book": "3 jobs"},
                        jobs=jobs, assemble=assemble, takes_seeds=False)


@pytest.fixture
def fake(tmp_path):
    counter_dir, flag = tmp_path / "calls", tmp_path / "fail"
    counter_dir.mkdir()
    return fake_result(counter_dir, flag), counter_dir, flag


@pytest.fixture
def importable_tests(monkeypatch):
    """Let worker processes started from scratch (submitit) import this module's job function."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))


# --------------------------------------------------------------------------------------------
# The list
# --------------------------------------------------------------------------------------------


def test_list_names_every_result_with_its_scales_and_size(capsys):
    assert cli.main(["compute", "--list"]) == 0
    listed = capsys.readouterr().out
    registry = compute.registry()
    assert len(registry) >= 15  # the book's stored results, found where the chapters declare them
    for name, result in registry.items():
        assert result.name == name
        assert re.search(rf"^{name}  \(chapter {result.chapter}; committed scale {result.committed_scale}; ", listed, re.M)
        for scale in result.scales:
            assert f"--scale {scale}: {result.expected[scale]}" in listed
        for f in result.files:
            assert f in listed


@pytest.mark.parametrize("name", list(compute.registry()))
def test_the_sizes_the_list_states_are_the_jobs_there_are(name):
    """Where ``expected`` starts with a number of jobs, it is the number of jobs of that scale."""
    result = compute.registry()[name]
    assert set(result.expected) == set(result.scales) and result.chapter in {
        p.name for p in (Path(compute.__file__).parents[1] / "chapters").iterdir() if p.is_dir()}
    for scale in result.scales:
        stated = re.match(r"(\d+) jobs?\b", result.expected[scale])
        assert stated, f"{name} --scale {scale}: state the number of jobs first ({result.expected[scale]!r})"
        assert int(stated.group(1)) == len(result.jobs(scale, None)), (name, scale)


def test_the_registry_is_what_the_chapters_declare():
    """compute keeps no list of names: every stored result is found where a chapter module declares it, once."""
    from attention_dynamics.chapters.architectures import sticky_hmm
    from attention_dynamics.chapters.sticky_markov_chain import report

    declared = compute.declared()
    assert declared["sticky_hmm"] is sticky_hmm.STICKY_HMM_RUNS
    assert declared["sticky_chain_benchmark"] is report.STICKY_CHAIN_BENCHMARK  # files made elsewhere, read alike
    assert set(compute.registry()) == {n for n, r in declared.items() if isinstance(r, StoredResult)}
    assert "sticky_chain_benchmark" not in compute.registry()
    assert all(result.name == name for name, result in declared.items())


def test_every_data_file_belongs_to_exactly_one_declared_result_and_every_declared_file_exists():
    """The package's data folder holds the declared results' files and nothing else, each declared once."""
    owners: dict[str, list[str]] = {}
    for name, result in compute.declared().items():
        for f in result.files:
            owners.setdefault(f, []).append(name)
    files = sorted(p.relative_to(compute.DATA_DIR).as_posix() for p in compute.DATA_DIR.rglob("*")
                   if p.is_file() and not p.name.startswith(".") and "__pycache__" not in p.parts)
    assert [f for f in files if f not in owners] == [], "data files no stored result declares"
    assert {f: o for f, o in owners.items() if len(o) > 1} == {}, "files two results declare"
    assert [f for f in owners if f not in files] == [], "declared files missing from data/"


def test_a_chapter_importing_a_results_module_depends_on_exactly_its_data_files(tmp_path):
    """A chapter's fingerprint finds the stored results it reads by their files' names in the modules it imports
    (:mod:`attention_dynamics.book.fingerprint`): importing the module that declares a result brings its files into
    the chapter's dependencies (``tests/test_fingerprint.py`` checks that an unused file does not count)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from attention_dynamics.book.fingerprint import chapter_dependencies
    from attention_dynamics.core.paths import PACKAGE_DIR

    for module in compute._declaring_modules():
        path = tmp_path / "chapter.ipynb"
        nbformat.write(new_notebook(cells=[new_code_cell(f"import {module}")]), path)
        data = {p.relative_to(compute.DATA_DIR).as_posix() for p in chapter_dependencies(path, PACKAGE_DIR)["data"]}
        for result in vars(importlib.import_module(module)).values():
            if isinstance(result, StoredData):  # (a declared file missing from data/ is the test above's)
                assert {f for f in result.files if (compute.DATA_DIR / f).exists()} <= data, (module, result.name)


def test_bad_requests_are_clear_errors(tmp_path, fake, capsys):
    result, _, _ = fake
    with pytest.raises(ValueError, match="unknown result 'nothing'"):
        compute.compute("nothing", root=tmp_path)
    with pytest.raises(ValueError, match="fake has scales fast, book, got 'huge'"):
        compute.compute(result, "huge", root=tmp_path)
    with pytest.raises(ValueError, match="unknown launcher 'cloud'"):
        compute.compute(result, "fast", launcher="cloud", root=tmp_path)
    with pytest.raises(ValueError, match="has no seeds to choose"):
        compute.compute(result, "fast", seeds=[1], root=tmp_path)
    assert cli.main(["compute"]) == 2
    assert cli.main(["compute", "nothing"]) == 1
    assert "unknown result 'nothing'" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# A real result through the local launcher
# --------------------------------------------------------------------------------------------


def test_a_small_result_through_local_processes(tmp_path):
    """The frame_freeze result at the fast scale on two local processes: every job's output, then the file, whose
    runs are those of the same jobs run in this process."""
    from attention_dynamics.chapters.two_timescale_em import freeze

    messages: list[str] = []
    folder = compute.compute("frame_freeze", "fast", root=tmp_path, processes=2, log=messages.append)
    assert folder == tmp_path / "frame_freeze" / "fast"
    jobs = freeze.freeze_jobs("fast")
    assert sorted(p.stem for p in (folder / "jobs").glob("*.json")) == sorted(j.key for j in jobs)
    stored = json.loads((folder / freeze.FILE).read_text())
    assert stored["scale"] == "fast" and "provenance" in stored
    job = next(j for j in jobs if j.kwargs["kind"] == "head" and j.kwargs["freeze_at"] == 30)
    record = json.loads((folder / "jobs" / f"{job.key}.json").read_text())
    assert record["function"] == "attention_dynamics.chapters.two_timescale_em.freeze:freeze_run"
    assert record["kwargs"] == json.loads(json.dumps(dict(job.kwargs)))
    torch.set_num_threads(1)  # as a job runs
    assert record["output"] == job.fn(**job.kwargs) and record["output"] in stored["head"]["runs"]
    assert any(f"{len(jobs)} job(s), 0 already done, {len(jobs)} to run with launcher local" in m for m in messages)


# --------------------------------------------------------------------------------------------
# Failing, resuming, promoting
# --------------------------------------------------------------------------------------------


def _fail_then_resume(result, counter_dir: Path, flag: Path, root: Path, **kwargs) -> None:
    flag.touch()
    with pytest.raises(RuntimeError, match=r"fake: 1 job\(s\) failed \(ccc\).*next run resumes"):
        compute.compute(result, "fast", root=root, log=lambda m: None, **kwargs)
    folder = compute.result_folder(result, "fast", None, root)
    assert sorted(p.stem for p in (folder / "jobs").glob("*.json")) == ["a", "bb"]  # the others' outputs are kept
    assert not (folder / "fake.json").exists()  # nothing assembled from a partial set
    assert _calls(counter_dir) == {"a": 1, "bb": 1, "ccc": 1}
    flag.unlink()
    messages: list[str] = []
    assert compute.compute(result, "fast", root=root, log=messages.append, **kwargs) == folder
    assert _calls(counter_dir) == {"a": 1, "bb": 1, "ccc": 2}  # only the failed job ran again
    assert any("3 job(s), 2 already done, 1 to run" in m for m in messages)
    stored = json.loads((folder / "fake.json").read_text())
    assert stored == {"scale": "fast", "outputs": {n: {"name": n, "square": len(n) ** 2} for n in ("a", "bb", "ccc")}}
    compute.compute(result, "fast", root=root, log=lambda m: None, **kwargs)  # everything done: nothing runs
    assert _calls(counter_dir) == {"a": 1, "bb": 1, "ccc": 2}


def test_a_failing_job_keeps_the_others_and_the_next_run_resumes_locally(tmp_path, fake):
    result, counter_dir, flag = fake
    _fail_then_resume(result, counter_dir, flag, tmp_path / "build", processes=1)


def test_a_failing_job_keeps_the_others_and_the_next_run_resumes_on_local_processes(tmp_path, fake):
    result, counter_dir, flag = fake
    _fail_then_resume(result, counter_dir, flag, tmp_path / "build", processes=2)
    assert len({line for p in counter_dir.glob("*.calls") for line in p.read_text().splitlines()} - {str(os.getpid())}) >= 1


def test_a_failing_job_keeps_the_others_and_the_next_run_resumes_through_submitit(tmp_path, fake, importable_tests):
    result, counter_dir, flag = fake
    root = tmp_path / "build"
    _fail_then_resume(result, counter_dir, flag, root, launcher="submitit-local", options={"time_min": 5})
    pids = {line for p in counter_dir.glob("*.calls") for line in p.read_text().splitlines()}
    assert str(os.getpid()) not in pids  # every job ran in a process of its own
    assert (compute.result_folder(result, "fast", None, root) / "submitit").is_dir()  # submitit's logs


def test_jobs_run_in_this_process_leave_its_thread_count_as_it_was(tmp_path, fake):
    result, counter_dir, _ = fake
    torch.set_num_threads(2)
    compute.compute(result, "fast", root=tmp_path / "build", processes=1, log=lambda m: None)
    assert torch.get_num_threads() == 2 and _calls(counter_dir) == {"a": 1, "bb": 1, "ccc": 1}


def test_a_job_whose_arguments_changed_runs_again(tmp_path, fake):
    result, counter_dir, flag = fake
    root = tmp_path / "build"
    compute.compute(result, "fast", root=root, processes=1, log=lambda m: None)
    changed = fake_result(counter_dir, tmp_path / "another_flag")  # ccc's arguments differ now
    compute.compute(changed, "fast", root=root, processes=1, log=lambda m: None)
    assert _calls(counter_dir) == {"a": 1, "bb": 1, "ccc": 2}


def test_promote_copies_the_committed_scale_only(tmp_path, fake, capsys):
    result, _, _ = fake
    root, data = tmp_path / "build", tmp_path / "data"
    with pytest.raises(FileNotFoundError, match="not computed"):
        compute.promote(result, root=root, data_dir=data)
    compute.compute(result, "fast", root=root, processes=1, log=lambda m: None)
    with pytest.raises(ValueError, match="only its committed scale 'book' is promoted"):
        compute.promote(result, "fast", root=root, data_dir=data)
    with pytest.raises(FileNotFoundError, match="not computed"):  # the fast files are not the committed scale's
        compute.promote(result, root=root, data_dir=data)
    assert not data.exists()
    folder = compute.compute(result, "book", root=root, processes=1, log=lambda m: None)
    copied = compute.promote(result, "book", root=root, data_dir=data, log=lambda m: None)
    assert copied == [data / "fake.json", data / "sub" / "note.txt"]
    for f in result.files:
        assert (data / f).read_bytes() == (folder / f).read_bytes()
    assert json.loads((data / "fake.json").read_text())["scale"] == "book"
    assert not list(data.rglob("*.tmp"))


# --------------------------------------------------------------------------------------------
# The command line: its checks, --root, and the SLURM options through submitit's debug executor
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-2", "1.5"])
def test_processes_below_one_are_refused(capsys, value):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["compute", "frame_freeze", "--scale", "fast", "--processes", value])
    assert exit_.value.code == 2
    assert "argument --processes: must be a positive integer" in capsys.readouterr().err


def test_processes_below_one_are_refused_by_the_function_too(tmp_path, fake):
    result, counter_dir, _ = fake
    for bad in (0, -1):
        with pytest.raises(ValueError, match="processes must be a positive integer"):
            compute.compute(result, "fast", processes=bad, root=tmp_path, log=lambda m: None)
    assert _calls(counter_dir) == {}


@pytest.fixture
def registered(monkeypatch, fake):
    """The fake result, found by name by the command line (as a chapter's result is through the registry)."""
    result = fake[0]
    real = compute._get
    monkeypatch.setattr(compute, "_get", lambda name: result if name == "fake" else real(name))
    return fake


def test_the_command_computes_and_promotes_under_its_root(tmp_path, registered, capsys):
    result, counter_dir, _ = registered
    root = tmp_path / "checkout"
    assert cli.main(["--root", str(root), "compute", "fake", "--scale", "book", "--processes", "1"]) == 0
    folder = root / "build" / "compute" / "fake" / "book"
    assert folder == compute.result_folder(result, "book", None, compute.compute_folder(root))
    assert json.loads((folder / "fake.json").read_text())["scale"] == "book"
    assert _calls(counter_dir) == {"a": 1, "bb": 1, "ccc": 1}
    assert cli.main(["--root", str(root), "compute", "fake", "--promote"]) == 0
    data = root / "src" / "attention_dynamics" / "data"
    assert data == compute.data_folder(root)
    assert (data / "fake.json").read_bytes() == (folder / "fake.json").read_bytes()
    assert (data / "sub" / "note.txt").exists()
    assert not (compute.DATA_DIR / "fake.json").exists() and not (compute.COMPUTE_DIR / "fake").exists()
    capsys.readouterr()
    assert cli.main(["--root", str(root), "compute", "--list"]) == 0  # this root's data folder holds no chapter's files
    listed = [line for line in capsys.readouterr().out.splitlines() if "committed scale" in line]
    assert len(listed) == len(compute.registry()) and all(line.endswith("NOT in data/)") for line in listed)


def test_the_slurm_options_reach_the_executor_through_submitit_debug(tmp_path, registered, monkeypatch):
    """--launcher submitit-debug: the jobs run in this process through submitit's debug executor, which is given the
    SLURM options exactly as the slurm launcher gives them."""
    import submitit

    result, counter_dir, _ = registered
    built, received = [], []
    build = compute.submitit_executor
    update = submitit.AutoExecutor.update_parameters

    def spy_build(folder, launcher, options):
        built.append(build(folder, launcher, options))
        return built[-1]

    def spy_update(self, **kwargs):
        received.append(kwargs)
        return update(self, **kwargs)

    monkeypatch.setattr(compute, "submitit_executor", spy_build)
    monkeypatch.setattr(submitit.AutoExecutor, "update_parameters", spy_update)
    root = tmp_path / "checkout"
    argv = ["--root", str(root), "compute", "fake", "--scale", "fast", "--launcher", "submitit-debug",
            "--partition", "cpu", "--time-min", "5", "--gpus", "0", "--array-parallelism", "2"]
    assert cli.main(argv) == 0
    folder = root / "build" / "compute" / "fake" / "fast"
    assert json.loads((folder / "fake.json").read_text())["outputs"]["ccc"] == {"name": "ccc", "square": 9}
    assert sorted(p.stem for p in (folder / "jobs").glob("*.json")) == ["a", "bb", "ccc"]
    pids = {line for p in counter_dir.glob("*.calls") for line in p.read_text().splitlines()}
    assert pids == {str(os.getpid())}  # the debug executor runs the jobs in this process

    (executor,) = built
    assert executor.cluster == "debug" and executor.folder == (folder / "submitit").resolve()
    options = {"partition": "cpu", "time_min": 5, "gpus": 0, "array_parallelism": 2}
    name = "attention-dynamics-fake"
    assert received == [compute.submitit_parameters("slurm", options, name)]
    assert received[0] == {"timeout_min": 5, "cpus_per_task": 1, "name": name, "slurm_partition": "cpu",
                           "slurm_array_parallelism": 2}  # no GPUs asked for: --gpus 0
    assert executor.parameters["timeout_min"] == 5  # the generic ones the debug executor keeps
    with_gpus = compute.submitit_parameters("submitit-debug", {**options, "gpus": 1}, name)
    assert with_gpus == compute.submitit_parameters("slurm", {**options, "gpus": 1}, name)
    assert with_gpus["gpus_per_node"] == 1
    assert "slurm_partition" not in compute.submitit_parameters("submitit-local", options, name)
