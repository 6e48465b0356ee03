"""inspect_web.text: the one way a long text keeps its head and tail, and the one way untrusted
text is printed on a terminal."""

from inspect_web.text import cut, inert, shorten


def test_cut_keeps_head_and_tail_and_counts_what_it_left_out():
    whole = cut("abcdef", 3, 3)
    assert (whole.head, whole.tail, whole.omitted) == ("abcdef", "", 0)
    part = cut("abcdefghij", 3, 2)
    assert (part.head, part.tail, part.omitted) == ("abc", "ij", 5)
    assert cut("abcdefghij", 4, 0).joined(" […]") == "abcd […]"


def test_shorten_says_how_much_was_omitted():
    assert shorten("short", 10) == "short"
    assert shorten("a" * 10 + "b" * 10, 10) == "aaaaa\n… [10 characters omitted] …\nbbbbb"
    assert shorten("x" * 20, 8, head=2, marker="<{omitted}>") == "xx<12>xxxxxx"


def test_inert_shows_controls_in_caret_notation():
    assert inert("a\x1b[2Jb\x07\r\n\tc") == "a^[[2Jb^G^M\n\tc"
    assert inert({"k": ["\x9b"]}) == {"k": ["\\x9b"]}
