"""Git patches (code.patch) are checked at spec load: nothing outside the tree, nothing in .git, no symlink out."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tacc_hub.jupyter.envinfo import worktree_patch
from tacc_hub.schema import SpecError, spec_from_data
from tacc_hub.schema.gitpatch import PatchError, check_patch


def git_spec(patch: str) -> dict[str, Any]:
    return {"name": "job", "entrypoint": {"argv": ["python", "x.py"]},
            "code": {"kind": "git", "url": "https://h/r.git", "commit": "abcdef0", "patch": patch}}


def new_file(path: str, body: str = "x\n", prefix: str = "diff --git a/{p} b/{p}\n") -> str:
    lines = body.splitlines()
    return (prefix.format(p=path) + f"new file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


def new_link(path: str, target: str) -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n")


HOSTILE: list[tuple[str, str, str]] = [
    ("absolute", new_file("/etc/cron.d/x"), "/etc/cron.d/x"),
    ("dotdot", new_file("../../.bashrc"), "../../.bashrc"),
    ("dotdot inside", new_file("src/../../outside"), "src/../../outside"),
    ("into .git", new_file(".git/hooks/post-checkout"), ".git/hooks/post-checkout"),
    ("into .GIT", new_file("sub/.GIT/config"), "sub/.GIT/config"),
    ("only +++ is bad", "--- a/ok\n+++ b/../evil\n@@ -1 +1 @@\n-a\n+b\n", "../evil"),
    ("rename to outside", "diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to ../y\n", "../y"),
    ("copy to .git", "diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to .git/config\n", ".git/config"),
    ("rename from absolute", "diff --git a/x b/y\nrename from /etc/passwd\nrename to y\n", "/etc/passwd"),
    ("quoted dotdot", 'diff --git "a/\\056\\056/x" "b/\\056\\056/x"\n', "../x"),
    ("quoted .git in --- line", '--- "a/.git/\\303\\244"\n+++ b/ok\n@@ -1 +1 @@\n-a\n+b\n', ".git/"),
    ("symlink absolute", new_link("link", "/etc/shadow"), "/etc/shadow"),
    ("symlink out", new_link("a/link", "../../outside"), "../../outside"),
    ("symlink into .git", new_link("link", ".git/config"), ".git"),
    ("mode change to symlink", "diff --git a/f b/f\nold mode 100644\nnew mode 120000\n--- a/f\n+++ b/f\n"
                               "@@ -1 +1 @@\n-x\n+/root\n", "/root"),
    ("retarget existing symlink", "diff --git a/l b/l\nindex 1234567..89abcde 120000\n--- a/l\n+++ b/l\n"
                                  "@@ -1 +1 @@\n-ok\n+../../x\n", "../../x"),
    ("mode change without target", "diff --git a/f b/f\nold mode 100644\nnew mode 120000\n", "no target"),
    ("binary symlink", "diff --git a/l b/l\nnew file mode 120000\nindex 0000000..1111111\nGIT binary patch\n"
                       "literal 5\nMc${NkvCvBc00Ufs7ytkO\n\nliteral 0\nHcmV?d00001\n\n", "binary"),
    ("header after a lying hunk count", "--- a/x\n+++ b/x\n@@ -1 +1,3 @@\n-a\n+b\n", "ends inside a hunk"),
    ("corrupt hunk", "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\nXdiff --git a/../y b/../y\n", "corrupt"),
    ("binary without data", "diff --git a/x.bin b/x.bin\nBinary files a/x.bin and b/x.bin differ\n", "--binary"),
    ("spaces, second name absolute", "diff --git a/x y b/x z /etc/passwd\n", "absolute"),
    ("spaces, dotdot", "diff --git a/my file b/../my file\n", "outside"),
]


@pytest.mark.parametrize(("patch", "named"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_patches_are_refused_naming_the_path(patch: str, named: str) -> None:
    with pytest.raises(PatchError):
        check_patch(patch)
    with pytest.raises(SpecError) as exc:
        spec_from_data(git_spec(patch))
    assert [f for f, _ in exc.value.errors] == ["code.patch"]
    assert named in exc.value.errors[0][1], exc.value.errors


def test_hunk_content_that_looks_like_a_header_is_content() -> None:
    # Removing the line "-- ../x" gives "--- ../x" in the hunk, adding "++ /etc" gives "+++ /etc": content.
    patch = ("diff --git a/notes.md b/notes.md\n--- a/notes.md\n+++ b/notes.md\n@@ -1,2 +1,2 @@\n"
             " keep\n--- ../x\n+++ /etc\n")
    assert check_patch(patch) == patch


def test_symlinks_inside_the_tree_and_no_patch_are_fine() -> None:
    for patch in [new_link("a/b/link", "../c"), new_link("link", "data/file"), new_file("a b/c d.txt")]:
        check_patch(patch)
    assert spec_from_data(git_spec(new_link("l", "x"))).code.patch is not None  # type: ignore[union-attr]
    spec = spec_from_data({**git_spec(""), "code": {"kind": "git", "url": "https://h/r", "commit": "abcdef0"}})
    assert spec.code.patch is None  # type: ignore[union-attr]


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def test_a_real_worktree_patch_passes_and_applies(tmp_path: Path) -> None:
    """Edits, a rename, a deletion, a mode change, a binary file, names with spaces and UTF-8, symlinks in the tree."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "src").mkdir()
    (repo / "src" / "train.py").write_text("print(1)\n-- not a header\n")
    (repo / "old name.txt").write_text("rename me\n" * 20)
    (repo / "gone.txt").write_text("bye\n")
    (repo / "run.sh").write_text("echo hi\n")
    os.symlink("src/train.py", repo / "link")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    (repo / "src" / "train.py").write_text("print(2)\n++ added\n")
    (repo / "old name.txt").rename(repo / "new name.txt")
    (repo / "gone.txt").unlink()
    (repo / "run.sh").chmod(0o755)
    (repo / "données ä.txt").write_text("utf-8 name\n")
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (repo / "link").unlink()
    os.symlink("src", repo / "link")
    os.symlink("../src/train.py", repo / "src" / "up")
    patch = worktree_patch(repo)
    assert "GIT binary patch" in patch and "b/données ä.txt" in patch and "120000" in patch
    spec = spec_from_data(git_spec(patch))
    assert spec.code.patch == patch  # type: ignore[union-attr]
    _git(repo, "add", "-A")
    renames = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "-M", "-C", "--binary", "HEAD"],
                             check=True, capture_output=True, text=True).stdout
    assert "rename from old name.txt" in renames and '"b/donn\\303\\251es \\303\\244.txt"' in renames
    check_patch(renames)
    # And git agrees: it applies to a clean checkout of the commit.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, capture_output=True)
    (tmp_path / "p.patch").write_text(patch)
    _git(clone, "apply", "--whitespace=nowarn", "--", str(tmp_path / "p.patch"))
    assert (clone / "blob.bin").read_bytes() == (repo / "blob.bin").read_bytes()
    assert os.readlink(clone / "src" / "up") == "../src/train.py"
