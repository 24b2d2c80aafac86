"""The model-family registry (models.registry): the book's five entries, their colours told apart under colour
blindness, registering and unregistering a family, each entry's verdict row, and the per-family claim-id tables of
chapter 7's reports, written out, against the ids the reports make from the registry.

A throw-away family going through chapter 7's code paths (build, train, plot, record claims) is
``tests/test_contributing.py``'s walkthrough of CONTRIBUTING.md's "Adding a model family".
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch.nn as nn

from attention_dynamics.models import factory, registry


def test_the_book_registers_five_families_in_order_with_paper_is_reports():
    assert registry.FAMILIES == ("transformer", "mamba", "lstm", "mlp_window", "mlp_blind")
    assert registry.family_names()[:5] == registry.FAMILIES
    assert factory.FAMILIES is registry.FAMILIES
    assert dict(factory.FAMILY_LABELS) == {"transformer": "Transformer", "mamba": "Mamba", "lstm": "LSTM",
                                           "mlp_window": "MLP (whole window)", "mlp_blind": "MLP (context-blind)"}
    assert registry.family("mamba").paper_i.binding_accuracy == 0.978
    assert registry.family("mlp_window").paper_i.realises is None  # Paper I does not test it
    with pytest.raises(ValueError, match="unknown model family 'gru'"):
        registry.family("gru")
    with pytest.raises(ValueError, match="one of the book's families"):
        registry.unregister_family("lstm")
    with pytest.raises(ValueError, match="registered already"):
        registry.register_family(registry.family("lstm"))


def _srgb_to_linear(c):
    c = np.asarray(c, dtype=float)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _linear_to_lab(rgb):
    """CIE L*a*b* (D65) of linear sRGB, written out here independently of any colour library."""
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = m @ rgb / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


# Machado, Oliveira and Fernandes (2009) simulation matrices at full severity, on linear sRGB.
_CVD = {
    "normal": np.eye(3),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}


def test_each_model_family_keeps_one_colour_told_apart_under_colour_blindness():
    """The family colours differ by at least ΔE*ab 15 from one another under normal vision and the three
    dichromacies (Mamba and the whole-window MLP were once hard to tell apart)."""
    families = list(registry.FAMILIES)
    linear = {f: _srgb_to_linear(matplotlib.colors.to_rgb(registry.family_color(f))) for f in families}
    closest = {}
    for vision, matrix in _CVD.items():
        lab = {f: _linear_to_lab(np.clip(matrix @ rgb, 0, 1)) for f, rgb in linear.items()}
        closest[vision] = min((float(np.linalg.norm(lab[a] - lab[b])), a, b)
                              for i, a in enumerate(families) for b in families[i + 1:])
    assert all(d >= 15 for d, _, _ in closest.values()), closest
    with pytest.raises(ValueError, match="unknown model family 'gru'"):
        registry.family_color("gru")


def _tiny(task, width: int) -> nn.Module:
    return nn.Sequential(nn.Embedding(task.vocab_size or 1, width), nn.Linear(width, task.n_out))


def test_a_family_registered_for_a_while_is_everywhere_then_gone():
    entry = registry.ModelFamily("tiny", "Tiny", "#56B4E9", _tiny, range(2, 9, 2))
    with registry.registered_family(entry) as registered:
        assert registered is registry.family("tiny") and registry.family_names()[-1] == "tiny"
        assert factory.FAMILY_LABELS["tiny"] == "Tiny" and registry.family_color("tiny") == "#56B4E9"
        assert factory.FAMILIES == registry.FAMILIES and "tiny" not in registry.FAMILIES  # the book's five stay five
    assert "tiny" not in registry.family_names() and "tiny" not in factory.FAMILY_LABELS
    with pytest.raises(ValueError, match="lower-case identifier"):
        registry.ModelFamily("Tiny GRU", "Tiny", "#56B4E9", _tiny, range(2, 9, 2))
    with pytest.raises(ValueError, match="hex string"):
        registry.ModelFamily("tiny", "Tiny", "blue", _tiny, range(2, 9, 2))


def test_every_entrys_verdict_row_is_a_row_of_the_verdict_page_that_reads_its_claims():
    from attention_dynamics.chapters.architectures.report import table_claim_id
    from attention_dynamics.ledger.verdicts import PAPER_CLAIMS

    rows = {row.id: row for row in PAPER_CLAIMS}
    for entry in registry.families():
        assert entry.verdict_row in rows, (entry.name, entry.verdict_row)
        assert table_claim_id("bijection_mae_bits", entry.name) in repr(rows[entry.verdict_row]), entry.name


def test_the_written_claim_id_tables_are_the_ids_the_reports_make_from_the_registry():
    """Chapter 7's reports make a family's claim ids from its name; each module writes the ids of the book's families
    out too, so that a search finds every id: the written tables are exactly the made ones."""
    from attention_dynamics.chapters.architectures import formats_report, hmm_formats, memory_report, report
    from attention_dynamics.tasks.wind_tunnels import FORMAT_TUNNELS, STICKY_HMM_TASK
    from attention_dynamics.tasks.hmm import INPUT_FORMATS

    book = registry.FAMILIES
    assert report.TABLE_CLAIM_IDS == {(name, f): report.table_claim_id(name, f)
                                      for name, *_ in report.TABLE_CLAIMS for f in book}
    assert report.STICKY_CLAIM_IDS == {f: report.sticky_claim_id(f) for f in book}
    assert memory_report.MEMORY_CLAIM_IDS == {t: {f: memory_report.memory_claim_id(t, f) for f in book}
                                              for t in ("hmm", STICKY_HMM_TASK)}
    assert memory_report.LONGMEM_KL_CLAIM_IDS == {f: memory_report.longmem_kl_claim_id(f) for f in book}
    assert memory_report.LONGMEM_MEMORY_CLAIM_IDS == {f: memory_report.longmem_memory_claim_id(f) for f in book}
    assert formats_report.CH6_SETTING_KL_CLAIM_IDS == {f: formats_report.ch6_setting_kl_claim_id(f) for f in book}
    assert formats_report.CH6_SETTING_MEMORY_CLAIM_IDS == {
        f: formats_report.ch6_setting_memory_claim_id(f) for f in book}
    for table, make in ((formats_report.FORMAT_KL_CLAIM_IDS, formats_report.format_kl_claim_id),
                        (formats_report.FORMAT_MEMORY_CLAIM_IDS, formats_report.format_memory_claim_id)):
        assert table == {base: {f: {fmt: make(base, f, fmt) for fmt in INPUT_FORMATS}
                                for f in hmm_formats.FORMAT_FAMILIES} for base in FORMAT_TUNNELS}
