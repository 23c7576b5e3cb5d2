"""tests/README.md says how the suite is laid out, and stays true: every ``tests/test_*.py`` matches a
pattern of its layout table (a new file that fits no group fails, saying to add a row or widen a
pattern), every pattern matches a file, every helper module (``tests/*.py`` not named ``test_*``) is
named in its helper list and every module listed exists; and no file of tests/ is named for a date, a
session or the process that wrote it (audit, leftover, followup, review, regressions, new_user, journey:
whole words of the name) rather than for what it tests.

The checks are functions of a list of names, so each is also run here on made-up bad names."""
from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
README = TESTS / "README.md"

#: words of the process that wrote a file, not of what it tests
#: whole words of a file name (between underscores) that name the process that wrote the tests, not what they
#: test; "regression" alone is a model (test_logistic_regression.py), "regressions" the process
PROCESS_WORDS = re.compile(r"(?:^|_)(audit\d*|leftovers?|followups?|follow_up|reviews?|regressions|new_user|"
                           r"journey)(?=_|$)")
MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
DATE = re.compile(rf"(?:^|_)(?:(?:{MONTHS})\d{{1,2}}|\d{{1,2}}(?:{MONTHS})|(?:19|20)\d\d)(?:_|$)|\d{{4}}-?\d\d")
SESSION_SUFFIX = re.compile(r"_[a-z]$")  # test_cli_b.py: the second session's file


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def layout_table(text: str) -> list[tuple[str, list[str]]]:
    """(group, its patterns) for every row of the README's table with a ``pattern`` column."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|") and "pattern" in _cells(line):
            column = _cells(line).index("pattern")
            rows = []
            for row in lines[i + 2:]:  # past the |---| line
                if not row.lstrip().startswith("|"):
                    break
                cells = _cells(row)
                rows.append((cells[0], re.findall(r"`([^`]+)`", cells[column])))
            return rows
    raise AssertionError(f"{README.relative_to(ROOT)} has no table with a `pattern` column")


def fedlib_modules() -> set[str]:
    """What ``<module>`` stands for: the modules and packages of fedlib, without a leading ``_``."""
    names = {p.stem for p in (ROOT / "fedlib").rglob("*.py") if p.stem not in {"__init__", "__main__"}}
    names |= {p.name for p in (ROOT / "fedlib").rglob("*") if p.is_dir() and (p / "__init__.py").is_file()}
    return {n.lstrip("_") for n in names}


def matches(name: str, pattern: str, modules: set[str]) -> bool:
    if "<module>" in pattern:
        return any(fnmatch.fnmatchcase(name, pattern.replace("<module>", m)) for m in modules)
    return fnmatch.fnmatchcase(name, pattern)


def unplaced(names: list[str], table, modules: set[str]) -> list[str]:
    """Test files that match no pattern of the layout table."""
    return [n for n in names if not any(matches(n, p, modules) for _, patterns in table for p in patterns)]


def badly_named(names: list[str]) -> dict[str, str]:
    """File name -> why it is named for something other than what it tests."""
    bad = {}
    for name in names:
        stem = Path(name).stem.lower()
        word = PROCESS_WORDS.search(stem)
        if word:
            bad[name] = f"the process word {word.group(1)!r}"
        elif DATE.search(stem):
            bad[name] = "a date"
        elif SESSION_SUFFIX.search(stem):
            bad[name] = "a session letter suffix"
    return bad


def listed_helpers(text: str) -> set[str]:
    """The ``- `name.py`: ...`` items of the README."""
    return set(re.findall(r"^- `(\w+\.py)`", text, flags=re.M))


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf8")


def _test_files() -> list[str]:
    return sorted(p.name for p in TESTS.glob("test_*.py"))


def _helpers() -> list[str]:
    return sorted(p.name for p in TESTS.glob("*.py") if not p.name.startswith("test_"))


def test_every_test_file_fits_a_group_of_the_readme(readme):
    table = layout_table(readme)
    assert len(table) >= 10 and all(patterns for _, patterns in table), table
    missing = unplaced(_test_files(), table, fedlib_modules())
    assert not missing, (f"{missing} fit no group of tests/README.md's layout table: add the file to the "
                         "group it belongs to (a pattern in its `pattern` column), or a row for a new group")


def test_every_pattern_of_the_readme_matches_a_file(readme):
    files, modules = _test_files(), fedlib_modules()
    stale = [(group, p) for group, patterns in layout_table(readme) for p in patterns
             if not any(matches(f, p, modules) for f in files)]
    assert not stale, f"patterns of tests/README.md's layout table that match no tests/test_*.py: {stale}"


def test_every_helper_module_is_named_in_the_readme(readme):
    listed = listed_helpers(readme)
    unlisted = [h for h in _helpers() if h not in listed]
    assert not unlisted, (f"helper modules of tests/ not in tests/README.md's helper list: {unlisted}; "
                          "add a `- `name.py`: what it is` line")
    gone = sorted(listed - set(_helpers()))
    assert not gone, f"tests/README.md lists helper modules that tests/ does not have: {gone}"


def test_no_file_is_named_for_a_date_a_session_or_a_process():
    names = sorted(p.name for p in TESTS.iterdir() if p.name != "__pycache__")
    bad = badly_named(names)
    assert not bad, ("tests/ files named for when or how they were written, not for what they test "
                     f"(rename them for the module or feature, see tests/README.md): {bad}")


def test_the_checks_catch_made_up_bad_names(readme):
    """Each check fails on a name made up to break it (and passes the suite's own names)."""
    table, modules = layout_table(readme), fedlib_modules()
    assert unplaced(["test_something_unheard_of.py", "test_rule.py", "test_cli_usage.py"], table, modules) \
        == ["test_something_unheard_of.py"]
    assert unplaced(["test_rule_extra.py", "test_data_leaf.py", "test_mutation_tree.py"], table, modules) == []
    made_up = ["test_cli_audit.py", "test_engine_leftovers.py", "test_rule_followups.py", "test_review.py",
               "test_regressions.py", "test_new_user_journey.py", "test_dec4_fixes.py", "test_rng_2026.py",
               "test_cli_b.py"]
    assert sorted(badly_named(made_up)) == sorted(made_up)
    assert badly_named(["test_cifar_data.py", "test_table1.py", "test_cli_cifar10.py", "test_appg_conditions.py",
                        "test_mutation_cifar10_engine.py", "bookutil.py", "test_logistic_regression.py",
                        "test_preview_images.py", "test_auditory.py"]) == {}
    assert listed_helpers("- `a.py`: one\n- `b.py`: two\n") == {"a.py", "b.py"}
