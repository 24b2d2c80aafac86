"""The stored results' declaration and the helpers every result shares (ledger.results): the settings per scale
and the scales they give, loading a declared file (or another copy of it), the seeds' checks, intervals over seeds;
and chapter 7's one HMM spec (chapters.architectures.hmm_tunnel), which its four results declare."""

from __future__ import annotations

import json

import pytest
from scipy import stats

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.ledger.results import (
    StoredData,
    StoredResult,
    check_seeds,
    load_data,
    one_seed,
    save_results,
    seed_range,
    t_intervals,
)


def _result(**kwargs) -> StoredResult:
    base = dict(name="toy", chapter="none", about="a toy", files=("toy.json",), committed_scale="book",
                expected={}, jobs=lambda scale, seeds=None: [], assemble=lambda scale, outputs, folder: None)
    return StoredResult(**{**base, **kwargs})


def test_a_result_declares_its_settings_per_scale_and_its_scales_follow_them():
    result = _result(specs={"book": {"steps": 100}, "fast": {"steps": 2}})
    assert result.scales == ("fast", "book")  # the book's order, whatever the specs' order
    assert result.spec("fast") == {"steps": 2}
    with pytest.raises(ValueError, match="toy has scales fast, book, got 'paper'"):
        result.spec("paper")
    with pytest.raises(ValueError, match="committed scale"):
        _result(specs={"fast": {}})
    with pytest.raises(ValueError, match="not among the book's scales"):
        _result(specs={"huge": {}, "book": {}})
    with pytest.raises(ValueError, match="declares no settings"):
        _result(scales=("fast", "book")).spec("fast")


def test_load_reads_the_declared_file_or_another_copy_and_a_reader_reads_the_rest(tmp_path):
    save_results({"x": 1}, tmp_path / "toy.json")
    result = _result(specs={"book": {}})
    assert result.data_path(data_dir=tmp_path) == tmp_path / "toy.json"
    assert result.load(path=tmp_path / "toy.json")["x"] == 1
    assert load_data("toy.json", data_dir=tmp_path)["x"] == 1 and "provenance" in load_data("toy.json", data_dir=tmp_path)
    with pytest.raises(TypeError, match="one JSON file"):
        result.load("toy")
    read = StoredData(name="two", chapter="none", about="two files", files=("a.txt", "b.txt"),
                      reader=lambda which, path=None: f"{which} from {path}")
    assert read.load("a", path="x") == "a from x"


def test_seeds_are_checked_once_for_every_result():
    assert check_seeds(None, (0, 1, 2)) == [0, 1, 2]
    for bad in ([3], [1, 1], [0, -1]):
        with pytest.raises(ValueError, match="at least two distinct non-negative integers"):
            check_seeds(bad, (0, 1))
    assert check_seeds([4], (), at_least=1) == [4]
    assert one_seed(None, "one seed only") == 0 and one_seed([7], "one seed only") == 7
    with pytest.raises(ValueError, match="one seed only"):
        one_seed([0, 1], "one seed only")


def test_intervals_over_seeds_and_the_seed_range():
    runs = [{"seed": s, "a": v, "b": 2 * v} for s, v in enumerate([0.1, 0.4, 0.3])]
    got = t_intervals(runs, ["a", "b"])
    low, high = stats.t.interval(0.95, df=2, loc=0.8 / 3, scale=stats.sem([0.1, 0.4, 0.3]))
    assert_book_close([got["a"]["low"], got["a"]["high"]], [low, high])
    assert set(got) == {"a", "b"} and got["b"]["n"] == 3
    assert seed_range({"runs": {"g": runs}}, "g", "a") == (0.1, 0.4)


def test_one_hmm_spec_for_chapter_7s_four_stored_results():
    """The four HMM results declare one dataclass; each one's settings are its committed file's."""
    from attention_dynamics.chapters.architectures import hmm_ch6_setting, hmm_formats, hmm_longmem, sticky_hmm
    from attention_dynamics.chapters.architectures.hmm_tunnel import HMMTunnelSpec
    from attention_dynamics.core.paths import data_path

    for result in (sticky_hmm.STICKY_HMM_RUNS, hmm_longmem.HMM_LONGMEM, hmm_formats.HMM_FORMATS,
                   hmm_ch6_setting.HMM_CH6_SETTING):
        assert all(isinstance(result.spec(s), HMMTunnelSpec) for s in result.scales)
        stored = json.loads(data_path(result.files[0]).read_text(encoding="utf-8"))
        assert stored["settings"] == json.loads(json.dumps(result.spec("book").to_json())), result.name
    book = hmm_longmem.HMM_LONGMEM.spec("book")
    assert book.family_steps("mamba") == 1500 and book.family_steps("lstm") == book.steps
    assert hmm_formats.HMM_FORMATS.spec("book").tunnel_steps("hmm") == 10_000
    assert hmm_ch6_setting.HMM_CH6_SETTING.spec("book").hmm_length == 20  # chapter 6's tunnel's sizes
    for bad, match in (({"steps_by_family": {"gru": 5}}, "unknown model family 'gru'"),
                       ({"seeds": (0, 0)}, "seeds"), ({"lr": 0.0}, "lr must be positive"),
                       ({"record": ("nothing",)}, "record names no field")):
        with pytest.raises(ValueError, match=match):
            HMMTunnelSpec(**{**book.__dict__, **bad})
