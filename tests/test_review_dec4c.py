"""Review of 7817915..9b903fc (helper A4)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _autodoc():
    spec = importlib.util.spec_from_file_location("fedlib_autodoc", ROOT / "book" / "_ext" / "fedlib_autodoc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_chapter_links_never_link_a_prefix_of_a_longer_number():
    """'chapter 10.5' or 'chapter 100' is not chapter 1 or 10 followed by the rest of the number:
    the number's last digits were allowed to be a digit at the end of the text or before a space."""
    mod = _autodoc()
    chapters = {n: f"/book/{n:02d}_x" for n in range(1, 11)}
    for text in ("chapter 10.5", "chapter 100", "chapter 123", "see chapter 100 here"):
        assert mod.chapter_links([text], chapters) == [text], text
    # the numbers it knows are still linked, with what follows them left as it is
    assert mod.chapter_links(["chapter 10."], chapters) == [":doc:`chapter 10 </book/10_x>`."]
    assert mod.chapter_links(["chapter 1's table"], chapters) == [":doc:`chapter 1 </book/01_x>`'s table"]
    assert mod.chapter_links(["chapters 2–4"], chapters) == [":doc:`chapters 2 </book/02_x>`–:doc:`4 </book/04_x>`"]
