"""What an intervention replaced (`recovery.viewer.detail.edit_of`), for each way an intervention edits a prefix."""

from __future__ import annotations

from recovery.viewer.detail import edit_of

ORIGINAL = "Start with 7.\n\nStep A: subtract 1. 7 - 1 = 6."


def test_an_appended_step_replaces_nothing():
    fact = "As is well known, 6 + 9 = 14."
    edit = edit_of(ORIGINAL, ORIGINAL + "\n\n" + fact, fact)
    assert (edit.shared_head, edit.removed, edit.added) == (ORIGINAL, "", "\n\n" + fact)
    assert edit.marks == ((True, "\n\n" + fact),)


def test_a_replaced_step_stands_beside_what_replaced_it():
    wrong = "Step A: subtract 1. 7 - 1 = 4."
    edit = edit_of(ORIGINAL, "Start with 7.\n\n" + wrong, wrong)
    assert (edit.shared_head, edit.removed, edit.added) == (
        "Start with 7.\n\n",
        "Step A: subtract 1. 7 - 1 = 6.",
        wrong,
    )


def test_a_paraphrase_replaces_the_whole_prefix():
    new = "We begin at 7.\n\nIn step A, 7 minus 1 makes 6."
    edit = edit_of(ORIGINAL, new, new)
    assert (edit.shared_head, edit.removed, edit.added, edit.shared_tail) == ("", ORIGINAL, new, "")


def test_characters_scattered_through_a_step_are_marked_where_they_stand():
    modified = "Start with 7.\n\nStep A: suXbtract 1. 7 -Q 1 = 6."
    edit = edit_of(ORIGINAL, modified, "XQ")
    assert edit.removed == ""
    assert [text for wrote, text in edit.marks if wrote] == ["X", "Q"]
    assert edit.shared_head + "".join(text for _, text in edit.marks) + edit.shared_tail == modified
