"""Mutation-testing pass on ``scripts/build_book.py`` (loaded with ``bookutil.build_script()``): the merging
of consecutive prints in the executed notebooks. Each test pins behaviour that a surviving mutant changed; its
docstring names the mutant (the commit messages that added the tests say which mutant each kills).

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/plotting.py)
(pass described in tests/README.md, Mutation passes):
  PL1 save_figure's committed folder without $FEDLIB_BOOK_BUILD; PL2 ``if seed`` -> ``if seed is not None``; PL3
  '.' and '..' taken as names; PL4 '.PNG' taken; PL5 ``profile is not None`` -> ``profile`` in the seed folder.
  killed by the suite: PL1-PL4. equivalent: PL5 (a profile is None or matches ``[A-Za-z0-9_-]+``, so it is never
  an empty string: both tests agree).

Mutants of 0e9da1f..c5aa211 (scripts/build_book.py: ``use_build_home_folders`` and its helpers, 5f96dc2; render's
``shlex.join``, 43122d4) (pass described in tests/README.md, Mutation passes): 15 mutants, one at a time, ``pytest -x
-q`` on test_book_pipeline.py's home-folder, quoted-command and executes-in-root tests, this file and test_scripts.py's
bad-argument test: 9 killed by the suite, 6 killed here, 0 equivalent.
  BB1 ``' '.join`` for ``shlex.join``; BB2 a variable the user set replaced; BB3 ``not writable`` -> ``writable``; BB4
  a folder tried by ``mkdir`` alone; BB5 an OSError read as writable; BB6 Path.home()'s RuntimeError not caught; BB7
  ``layout.root`` for ``layout.build``; BB8 the folder not made; BB9 the note on stdout; BB10 MPLCONFIGDIR's default
  without XDG_CONFIG_HOME; BB11 JUPYTER_RUNTIME_DIR's default under HOME (XDG_DATA_HOME ignored); BB12 main without
  ``use_build_home_folders``; BB13 the note when nothing moved; BB14 the variables moved not returned; BB15
  IPYTHONDIR's default ``~/.config/ipython``.
  killed by the suite: BB1 (test_render_prints_jupyter_books_command_quoted_for_a_checkout_path_with_spaces), BB3,
  BB5, BB7-BB9, BB12-BB14 (test_build_script_runs_with_a_home_folder_that_cannot_be_written). killed here: BB2,
  BB10, BB11, BB15 (test_only_the_home_folders_unset_and_unwritable_are_moved_under_the_build), BB4, BB6
  (test_a_home_folder_that_takes_no_file_is_moved_and_no_home_at_all_too).

Mutants of c28e9dd, the error paths of the scripts other than import_gpu_results.py (in
test_mutation_import_gpu_results.py): scripts/build_book.py (every ``except``, exit status and ``sys.exit``),
make_cifar_sample.py, vr_spectrum.py, count_outside_accuracy.py (pass described in tests/README.md, Mutation
passes): 25 mutants, one at a time, ``pytest -x -q`` on test_scripts.py's tests of the script, this file,
test_book_pipeline.py's build-script tests and test_scripts_smoke.py (3 runs each for the folders that cannot be
made or written): 16 killed by the suite, 4 killed here, 2 equivalent, 3 left alive without a test.
  SCR10, SCR11 make_cifar_sample without FileNotFoundError / ValueError; SCR12 its ``return 0`` -> 1; SCR13
  ``main()`` without ``raise SystemExit``; SCR14 vr_spectrum's mkdir OSError; SCR15 its ``return 0`` -> 1; SCR16
  its SystemExit for a count that changed with the phase step -> a print; SCR17 count_outside_accuracy's ``return
  0`` -> 1; SCR18 ``_writable_folder`` without ``except OSError``; SCR19, SCR20 ``use_build_home_folders`` without
  RuntimeError / KeyError; SCR21 render's ``return 1`` for a table left as text -> 0; SCR22 ``default_jobs``'
  ValueError; SCR23, SCR24 ``execution_order`` without RecursionError / OSError; SCR25, SCR26, SCR34
  ``kept_chapters_problem`` without OSError / ValueError / RecursionError; SCR27, SCR28 the ``return 2`` of
  --render-only without a build and of --chapters that cannot keep the others -> 1; SCR29 a failed execution's
  ``return 1`` -> 0; SCR30 ``main()`` without ``sys.exit``; SCR31, SCR32 --jobs' and --chapters' ValueError; SCR33
  a chapter's time not recorded.
  killed by the suite: SCR10-SCR12, SCR14, SCR18, SCR19, SCR22-SCR25, SCR28-SCR33.
  killed here: SCR21 (test_render_fails_when_a_table_came_out_as_text), SCR26, SCR34
  (test_kept_chapters_with_unreadable_timings_are_refused_by_name), SCR27
  (test_render_only_without_executed_notebooks_exits_2). Each 3 of 3 runs, and the tests pass 3 of 3 on the code.
  equivalent:
  * SCR13 -- make_cifar_sample's ``main`` returns 0 only (its refusals exit through ``parser.error``).
  * SCR20 -- on Python >= 3.10 (the project's) ``Path.home()`` raises RuntimeError only: ``os.path.expanduser``
    passes over pwd's KeyError.
  left alive at the time: SCR15, SCR16, SCR17 -- no test ran vr_spectrum's or count_outside_accuracy's ``main`` to
  its end. Rechecked later (each mutant applied by hand, the named tests run): SCR15 is killed by
  test_linearised_vr.py's test_vr_spectrum_script_and_reader and test_vr_spectrum_script_counts_and_reader, SCR17 by
  its test_count_outside_accuracy_script (both scripts run to their end on small inputs now), SCR16 by its
  test_vr_spectrum_script_stops_when_the_count_changes_with_the_phase_step (a count made to differ between the
  phase steps).
"""
import pytest


def test_merge_adjacent_streams_leaves_other_outputs_of_one_type_apart():
    """Two consecutive display_data outputs (two tables) are no prints: kept as they are (mutant: the
    ``== "stream"`` check dropped, which joined them, or failed on their missing text)."""
    import nbformat
    from bookutil import build_script

    table = lambda t: nbformat.v4.new_output("display_data", data={"text/markdown": t})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("show()", outputs=[table("| a |"), table("| b |")])])
    assert build_script().merge_adjacent_streams(nb) == 0
    assert [o.data["text/markdown"] for o in nb.cells[0].outputs] == ["| a |", "| b |"]


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


_HOME_VARIABLES = ("HOME", "IPYTHONDIR", "JUPYTER_RUNTIME_DIR", "MPLCONFIGDIR", "JUPYTER_DATA_DIR",
                   "JUPYTER_PLATFORM_DIRS", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR")


def _unwritable_home(tmp_path, monkeypatch):
    """build_book.py loaded, its home folder variables unset, and ``HOME`` a file (under which no folder can be
    made): ``(module, layout)``, the layout's root under tmp_path. monkeypatch restores what the script sets."""
    from bookutil import build_script

    for variable in _HOME_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    tmp_path.mkdir(parents=True, exist_ok=True)
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    monkeypatch.setenv("HOME", str(home))
    module = build_script()
    return module, module.Layout(tmp_path / "book")


def test_only_the_home_folders_unset_and_unwritable_are_moved_under_the_build(tmp_path, monkeypatch, capsys):
    """BB2, BB10, BB11, BB15 (0e9da1f..c5aa211): with ``HOME`` unwritable, ``use_build_home_folders`` points
    IPYTHONDIR, JUPYTER_RUNTIME_DIR and MPLCONFIGDIR at ``_build/home/<name>`` (each folder made), and says so on
    stderr; a variable the user set is kept, writable or not (BB2 replaced it); with XDG_CONFIG_HOME and
    XDG_DATA_HOME writable, Matplotlib's and Jupyter's runtime folders are there (Matplotlib's config, Jupyter's
    data folder) and are not moved (BB10 tried Matplotlib's under HOME, ignoring XDG_CONFIG_HOME; BB11 Jupyter's
    runtime folder under HOME, ignoring XDG_DATA_HOME). In a writable home whose ``.ipython`` is a file, IPython's
    folder (``~/.ipython``) alone is moved (BB15 tried ``~/.config/ipython``)."""
    import os

    module, layout = _unwritable_home(tmp_path, monkeypatch)
    homes = {name: layout.build / "home" / name for name in ("ipython", "jupyter-runtime", "matplotlib")}
    assert module.use_build_home_folders(layout) == ["IPYTHONDIR", "JUPYTER_RUNTIME_DIR", "MPLCONFIGDIR"]
    assert [os.environ[v] for v in ("IPYTHONDIR", "JUPYTER_RUNTIME_DIR", "MPLCONFIGDIR")] == \
        [str(homes[n]) for n in ("ipython", "jupyter-runtime", "matplotlib")]
    assert all(folder.is_dir() for folder in homes.values())
    assert capsys.readouterr().err == (
        f"note: the home folder ({tmp_path / 'home-is-a-file'}) cannot be written: IPYTHONDIR={homes['ipython']}, "
        f"JUPYTER_RUNTIME_DIR={homes['jupyter-runtime']}, MPLCONFIGDIR={homes['matplotlib']}\n")

    module, layout = _unwritable_home(tmp_path / "again", monkeypatch)
    mine = tmp_path / "again" / "home-is-a-file" / "ipython"  # under the file: no folder can be made there
    monkeypatch.setenv("IPYTHONDIR", str(mine))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert module.use_build_home_folders(layout) == []
    assert os.environ["IPYTHONDIR"] == str(mine) and "MPLCONFIGDIR" not in os.environ
    assert (tmp_path / "config" / "matplotlib").is_dir() and (tmp_path / "data" / "jupyter" / "runtime").is_dir()

    module, layout = _unwritable_home(tmp_path / "third", monkeypatch)
    home = tmp_path / "third" / "home"
    home.mkdir()
    (home / ".ipython").write_text("")  # IPython's folder is a file here; the rest of the home is writable
    monkeypatch.setenv("HOME", str(home))
    assert module.use_build_home_folders(layout) == ["IPYTHONDIR"]


def test_a_home_folder_that_takes_no_file_is_moved_and_no_home_at_all_too(tmp_path, monkeypatch, capsys):
    """BB4, BB6 (0e9da1f..c5aa211): a default folder that exists but takes no new file (as root, ``/proc/self``:
    ``HOME=/proc`` made IPython's ``FileNotFoundError``; a read-only folder otherwise) is moved: the folder is tried
    by creating a file in it, not only by making it (BB4 took it). With no home folder to be found at all
    (``Path.home()`` raising RuntimeError: ``HOME`` unset and no user entry), the folders under it are moved too
    (BB6: the RuntimeError stopped the build)."""
    import os
    import pathlib

    module, layout = _unwritable_home(tmp_path, monkeypatch)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    if os.geteuid() == 0:
        taking_no_file = pathlib.Path("/proc/self")
        if not taking_no_file.is_dir():
            pytest.skip("no /proc/self: no folder that takes no file as root")
    else:
        taking_no_file = tmp_path / "read-only"
        taking_no_file.mkdir(mode=0o555)
    real = module._default_home_folder
    monkeypatch.setattr(module, "_default_home_folder", lambda variable:
                        taking_no_file if variable == "IPYTHONDIR" else real(variable))
    assert module.use_build_home_folders(layout) == ["IPYTHONDIR"]
    assert os.environ["IPYTHONDIR"] == str(layout.build / "home" / "ipython")

    module, layout = _unwritable_home(tmp_path / "again", monkeypatch)
    monkeypatch.delenv("HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(pathlib.Path, "home", staticmethod(no_home))
    capsys.readouterr()
    assert module.use_build_home_folders(layout) == ["IPYTHONDIR", "MPLCONFIGDIR"]
    assert capsys.readouterr().err.startswith("note: the home folder (unset) cannot be written: IPYTHONDIR=")


# ----------------------------------------------------------------------------- error paths: exit statuses, bad files
def test_render_fails_when_a_table_came_out_as_text(tmp_path, monkeypatch, capsys):
    """jupyter-book's exit status 0 is not enough: a Markdown table the renderer left as text makes ``render``
    return 1 (and say which page). Mutant: that ``return 1`` -> ``return 0``: the build passed with the broken
    table (the tests read ``unrendered_tables`` alone, or need the real book)."""
    import subprocess

    from bookutil import build_script

    module = build_script()
    layout = module.Layout(tmp_path / "book")
    monkeypatch.setattr(module, "merge_streams_in_mirror", lambda layout: None)
    monkeypatch.setattr(subprocess, "call", lambda cmd, cwd=None: 0)
    monkeypatch.setattr(module, "unrendered_tables", lambda html: [("ch01.html", "| a | b |")])
    assert module.render(layout) == 1
    assert "ch01.html: a Markdown table came out as text: | a | b |" in capsys.readouterr().err


@pytest.mark.parametrize("contents", ["{not json", "[" * 100000], ids=["not JSON", "nested too deeply"])
def test_kept_chapters_with_unreadable_timings_are_refused_by_name(tmp_path, contents):
    """``--chapters`` with an earlier build's timings file that does not parse (cut short, or nested past the
    recursion limit) is refused naming the file as missing or unreadable, not a traceback. Mutants: the
    ``except (OSError, ValueError, RecursionError)`` of ``kept_chapters_problem`` without ValueError or without
    RecursionError (the tests had no timings file, an OSError, or a readable one)."""
    from bookutil import build_script

    module = build_script()
    layout = module.Layout(tmp_path / "book")
    layout.times_json.parent.mkdir(parents=True, exist_ok=True)
    layout.times_json.write_text(contents)
    problem = module.kept_chapters_problem(layout, ["a.ipynb", "b.ipynb"], ["a.ipynb"], {"profile": "quick"})
    assert problem is not None and "is missing or unreadable: no earlier build to keep chapters from" in problem


def test_render_only_without_executed_notebooks_exits_2(tmp_path, monkeypatch, capsys):
    """``--render-only`` before anything was executed is a usage error: exit status 2 and the folder named.
    Mutant: that ``return 2`` -> ``return 1`` (no test ran --render-only without a build)."""
    from bookutil import build_script

    for variable in _HOME_VARIABLES:  # writable folders of their own: nothing to move under the build
        monkeypatch.setenv(variable, str(tmp_path / variable.lower()))
    root = tmp_path / "book"
    root.mkdir()
    (root / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (root / "_config.yml").write_text("title: t\n")
    module = build_script()
    assert module.main(["--root", str(root), "--render-only"]) == 2
    assert f"error: {module.Layout(root).executed} does not exist; execute first" in capsys.readouterr().err
