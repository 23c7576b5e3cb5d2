"""Mutation pass over the code written on 2026-12-04 (afternoon): tests for the mutants the
suite let through (see the commit messages for which mutant each test kills)."""
import errno
import pickle

import numpy as np
import pytest

from fedlib import checkpoint as ck


def _save(path):
    return ck.save_checkpoint(path, config={"a": 1}, round_done=2, state={"w": np.arange(3.0)},
                              history=[{"round": 1}], seed=0, kind="test")


def test_an_empty_checkpoint_file_is_reported_as_empty(tmp_path):
    path = tmp_path / "ck.pkl"
    path.write_bytes(b"")
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason == "empty (0 bytes)"


def test_a_truncated_checkpoint_names_the_unpickling_error_not_empty(tmp_path):
    path = _save(tmp_path / "ck.pkl")
    path.write_bytes(path.read_bytes()[:20])  # no footer left: read unchecked, fails to unpickle
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason.startswith("truncated, corrupt or not a fedlib checkpoint: it does not unpickle (")


def test_a_read_error_while_unpickling_is_unreadable_not_corrupt(tmp_path, monkeypatch):
    path = _save(tmp_path / "ck.pkl")
    assert ck.load_checkpoint(path, kind="test")["round"] == 2

    def failing_load(fh):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(ck.pickle, "load", failing_load)
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason == "unreadable (Input/output error)"


# --------------------------------------------------------------------------- solvers: an own step's closed forms
import dataclasses  # noqa: E402

from fedlib.solvers import LocalSolver, check_own_step  # noqa: E402


@dataclasses.dataclass(frozen=True)
class _RampStep(LocalSolver):
    """SGD whose step ``k`` (from 0) multiplies the gradient by ``k + 1``, with the matching counter:
    x_tau = x_0 - lr * sum_k (k + 1) g_k, so a_i = [1, 2, ..., tau] and ||a_i||_1 = tau (tau + 1) / 2,
    where LocalSolver's SGD formulas would give [1] * tau and tau."""

    def update(self, state, grads):
        return super().update(state, grads * float(state.step + 1))

    def counter_step(self, k, counter):
        a, u = counter
        return (a + (k + 1.0), 1.0)


@dataclasses.dataclass(frozen=True)
class _RampStepWithItsOwnAVector(_RampStep):
    """``_RampStep`` with its own ``a_vector``, written from LocalSolver's: SGD's closed form (ones)
    times the ramp k + 1. ``super().a_vector`` must then be the built-in formula, not a probe of this
    step (which would count the ramp twice: [1, 4, 9, ...])."""

    def a_vector(self, tau):
        return super().a_vector(tau) * np.arange(1.0, tau + 1.0)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_a_subclass_with_its_own_step_gets_the_a_vector_and_a_norm_of_that_step(weight_decay):
    """Mutants: the own-step branch of a_vector / a_norm dropped (SGD's ones and tau), the probe left with
    weight decay on, its sign flipped, a_norm read after the first step. With weight decay 0.1 the
    decayed probe would give a_0 = 1 - 2 * 0.1 * lr * 1 for tau = 2, not 1."""
    solver = _RampStep(lr=0.1, weight_decay=weight_decay)
    assert not solver.builtin_step
    assert check_own_step("s", solver) is solver
    for tau in (1, 2, 5):
        np.testing.assert_allclose(solver.a_vector(tau), np.arange(1.0, tau + 1.0), rtol=1e-13)
        assert solver.a_norm(tau) == pytest.approx(tau * (tau + 1) / 2, rel=1e-13)


def test_a_subclass_that_overrides_a_vector_gets_the_built_in_formula_from_super():
    """Mutant: the own-step branch taken even where the subclass overrides a_vector (its super() call
    then probed the step instead of giving the formula)."""
    solver = _RampStepWithItsOwnAVector(lr=0.1)
    assert not solver.builtin_step
    np.testing.assert_array_equal(solver.a_vector(4), [1.0, 2.0, 3.0, 4.0])
    assert check_own_step("s", solver) is solver


# --------------------------------------------------------------------------- table1: each call's record
def test_each_call_that_trained_a_group_is_recorded_with_its_rounds_and_any_switch_is_flagged(tmp_path, monkeypatch):
    """Three calls train one 3-round group: rounds [0, 1), [1, 2) (each interrupted after its checkpoint),
    then [2, 3). The second call's record must say it began at round 1 (mutant: [0, end)); with the first
    call's record rewritten to cuda_graph=True, the last (eager) call's result must flag the switch
    although the second call was eager too (mutant: only when *every* earlier call differs)."""
    from cliutil import cli_exit
    from test_leftovers_dec4c import _interrupted_after_first_checkpoint, _rewrite, _table1_args

    from fedlib.results import read_result

    args = _table1_args(tmp_path, "--rounds", "3")
    ckpt = _interrupted_after_first_checkpoint(monkeypatch, args)
    assert [c["rounds"] for c in ck.load_checkpoint(ckpt)["extra"]["calls"]] == [[0, 1]]
    ckpt = _interrupted_after_first_checkpoint(monkeypatch, args)
    calls = ck.load_checkpoint(ckpt)["extra"]["calls"]
    assert [(c["cuda_graph"], c["rounds"]) for c in calls] == [(False, [0, 1]), (False, [1, 2])]
    _rewrite(ckpt, lambda doc: doc["extra"]["calls"][0].update(cuda_graph=True))
    rc, out, err = cli_exit(args)
    assert rc == 0, err
    resumed = read_result(tmp_path / "sgd-e2-fedavg__seed0.json")["provenance"]["resumed"]
    assert resumed["from_round"] == 2
    assert [(c["cuda_graph"], c["rounds"]) for c in resumed["earlier_calls"]] == [(True, [0, 1]), (False, [1, 2])]
    assert resumed.get("cuda_graph_changed") is True
    assert "CUDA graphs on in an earlier call" in out


# --------------------------------------------------------------------------- the book's autodoc extension
def _autodoc():
    from bookutil import autodoc_extension

    return autodoc_extension()


CHAPTERS = {2: "/book/02_x", 3: "/book/03_x"}


def test_chapter_links_leave_text_inside_backquotes_alone():
    """Mutant: the odd-backquote check dropped (a link inside a ``literal`` breaks it)."""
    ext = _autodoc()
    assert ext.chapter_links(["``see chapter 2`` and chapter 2."], CHAPTERS) == [
        "``see chapter 2`` and :doc:`chapter 2 </book/02_x>`."]
    assert ext.chapter_links(["`f(chapter 2)` here"], CHAPTERS) == ["`f(chapter 2)` here"]


def test_chapter_links_follow_a_literal_across_the_lines_of_a_paragraph():
    """An inline literal may span lines (``train_clients(...,`` / ``dtype=...)``): what follows its
    closing backquotes is prose and is linked, what lies inside is not; a blank line ends the paragraph
    and any literal left open in it. Counting each line's backquotes alone took the closing run on the
    second line for an opening one (the API page's 'chapter 6 asserts it' lost its link)."""
    ext = _autodoc()
    lines = ["With ``train_clients(...,", "dtype=x)`` this is noise (chapter 2 asserts it)."]
    assert ext.chapter_links(lines, CHAPTERS) == [
        lines[0], "dtype=x)`` this is noise (:doc:`chapter 2 </book/02_x>` asserts it)."]
    inside = ["a ``literal that spans", "chapter 2 in it`` and chapter 3"]
    assert ext.chapter_links(inside, CHAPTERS) == [
        inside[0], "chapter 2 in it`` and :doc:`chapter 3 </book/03_x>`"]
    unclosed = ["an odd `` here", "", "chapter 2 of a new paragraph"]
    assert ext.chapter_links(unclosed, CHAPTERS)[2] == ":doc:`chapter 2 </book/02_x>` of a new paragraph"


def test_chapter_links_link_a_list_only_when_every_number_is_a_chapter():
    """Mutant: all -> any (a list with an unknown number was linked, or failed on it)."""
    ext = _autodoc()
    assert ext.chapter_links(["chapters 2 and 9"], CHAPTERS) == ["chapters 2 and 9"]
    assert ext.chapter_links(["chapters 2 and 3"], CHAPTERS) == [
        ":doc:`chapters 2 </book/02_x>` and :doc:`3 </book/03_x>`"]


def test_chapter_links_leave_doctest_continuation_lines_alone():
    """Mutant: only ``>>>`` lines treated as doctest (``...`` continuation lines were linked)."""
    ext = _autodoc()
    lines = [">>> f(1,", "...   chapter=2)  # chapter 2", "..."]
    assert ext.chapter_links(lines, CHAPTERS) == lines


def test_section_rubrics_underline_length_and_indentation():
    """An underline one shorter than its title counts (mutant: >= len(title)); one indented
    differently from its title does not (mutant: the indentation check dropped)."""
    ext = _autodoc()
    assert ext.section_rubrics(["A round", "------", "text"]) == [".. rubric:: A round", "", "text"]
    assert ext.section_rubrics(["A round", "-----"]) == ["A round", "-----"]
    assert ext.section_rubrics(["A round", "  -------"]) == ["A round", "  -------"]
    assert ext.section_rubrics(["  A round", "  -------"]) == ["  .. rubric:: A round", ""]


def test_chapters_maps_each_numbered_notebook_to_an_absolute_docname(tmp_path):
    """Mutant: a relative docname ("book/03_x") resolves against the API page's folder."""
    from types import SimpleNamespace

    ext = _autodoc()
    (tmp_path / "book").mkdir()
    for name in ("03_x.ipynb", "10_more.ipynb", "intro.ipynb", "4_short.ipynb", "05_y.md"):
        (tmp_path / "book" / name).write_text("{}")
    assert ext._chapters(SimpleNamespace(srcdir=str(tmp_path))) == {3: "/book/03_x", 10: "/book/10_more"}


# --------------------------------------------------------------------------- build_book: merged prints
def test_merge_adjacent_streams_leaves_other_outputs_of_one_type_apart():
    """Two consecutive display_data outputs (two tables) are no prints: kept as they are (mutant: the
    ``== "stream"`` check dropped, which joined them, or failed on their missing text)."""
    import nbformat
    from bookutil import build_script

    table = lambda t: nbformat.v4.new_output("display_data", data={"text/markdown": t})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("show()", outputs=[table("| a |"), table("| b |")])])
    assert build_script().merge_adjacent_streams(nb) == 0
    assert [o.data["text/markdown"] for o in nb.cells[0].outputs] == ["| a |", "| b |"]


# --------------------------------------------------------------------------- chapter 8: no seeds, no pair
def test_sampling_summary_states_no_paired_error_for_rows_without_seeds():
    """Rows with no averaged iterates (0 seeds) share the shape (0, d), and their limits differ, but there
    is nothing to average: the sentence must be left out (mutant: the len(averaged) check dropped, which
    printed the mean of nothing, nan)."""
    from fedlib.experiments import speedup as S

    srow = lambda m, q, value, eff: S.SamplingRow("fednova", "with-replacement", m, q, 1024, 6.5, 0.01, value, 0.01,
                                                  eff)
    brow = lambda T, choice, averaged, limit: S.BiasRow(2, T, 10.0 / T, choice, 0.3, 0.01, 0.3, 0.05, 0.08, 1.0,
                                                        np.asarray(averaged, dtype=float), np.asarray(limit, dtype=float))
    none = np.zeros((0, 3))
    bias = [brow(T, choice, none, np.ones(3) if choice != "population" else np.zeros(3))
            for T in (1000, 4000) for choice in ("population", "participants", "selected_p")]
    big, small = [srow(256, 4, 0.2, 3.95), srow(256, 16, 0.1, 15.1)], [srow(4, 4, 0.3, 2.29), srow(4, 16, 0.25, 3.4)]
    text = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16, bias)
    assert "must be fixed" in text and "Paired" not in text and "nan" not in text


def test_merge_streams_in_mirror_rewrites_the_executed_notebooks_of_the_toc(tmp_path):
    """Every notebook the mirror's _toc.yml lists gets its consecutive prints joined on disk; a page
    in Markdown is left alone (mutant: the merged notebook not written back, survived)."""
    from types import SimpleNamespace

    import nbformat
    from bookutil import build_script

    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: book/01_a\n", encoding="utf8")
    (tmp_path / "intro.md").write_text("# Intro\n", encoding="utf8")
    (tmp_path / "book").mkdir()
    stream = lambda text: nbformat.v4.new_output("stream", name="stdout", text=text)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("run()", outputs=[stream("a\n"), stream("b\n")])])
    nbformat.write(nb, tmp_path / "book" / "01_a.ipynb")
    build_script().merge_streams_in_mirror(SimpleNamespace(executed=tmp_path))
    outs = nbformat.read(tmp_path / "book" / "01_a.ipynb", as_version=4).cells[0].outputs
    assert [(o.output_type, o.text) for o in outs] == [("stream", "a\nb\n")]
    assert (tmp_path / "intro.md").read_text(encoding="utf8") == "# Intro\n"
