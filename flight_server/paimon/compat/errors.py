"""What a pypaimon (or OS) error means for the server: one typed outcome, so that nothing outside
compat matches pypaimon's or the OS's error text."""

from __future__ import annotations

import enum
import errno


class Outcome(enum.Enum):
    """What an error from a Paimon write, commit, plan or read says happened.

    Read from pypaimon 2.1.0: see `classify`."""

    DISK_FULL = "disk_full"  # the warehouse has no space left
    CONFLICT = "conflict"  # a commit lost a race with another writer, or cannot tell whether it landed
    MISSING_FILE = "missing_file"  # a file the operation needed is gone (or never was)
    OTHER = "other"


# pypaimon's words for a commit that lost a race: "Commit failed N after ... there maybe exist
# commit conflicts", "File deletion conflicts detected!", "Cannot determine whether commit ...
# succeeded" (raised), "... Try again." (logged); pypaimon-rust's commit says "conflict" too.
_CONFLICT_WORDS = ("Cannot determine whether commit", "Try again", "onflict")
_DISK_FULL_WORDS = ("No space left on device",)
# pypaimon's, pypaimon-rust's and pyarrow's words for a file that is not there.
_MISSING_WORDS = ("NotFound", "No such file", "doesn't exist", "does not exist")


def classify(e: BaseException) -> Outcome:
    """The outcome `e` reports, by its type and errno where it has them, else by its text (the
    native reader and writer, and a commit worker process, hand errors on as text). A full disk
    comes first: retrying would fail the same way, however the error words it.

    Read from pypaimon 2.1.0: `FileStoreCommit._try_commit` raises RuntimeErrors with the words in
    `_CONFLICT_WORDS`; `LocalFileIO` raises the OS's OSErrors (with errno); pypaimon-rust and
    pyarrow raise errors whose text names a missing file or a full disk."""
    text = str(e)
    if getattr(e, "errno", None) == errno.ENOSPC or any(w in text for w in _DISK_FULL_WORDS):
        return Outcome.DISK_FULL
    if any(w in text for w in _CONFLICT_WORDS):
        return Outcome.CONFLICT
    if isinstance(e, FileNotFoundError) or any(w in text for w in _MISSING_WORDS):
        return Outcome.MISSING_FILE
    return Outcome.OTHER
