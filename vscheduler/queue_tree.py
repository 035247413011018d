"""Queues as a tree: `spec.parent` names a queue's parent, `root` is the top.

Volcano's hierarchical queues (the capacity plugin's `enableHierarchy`). A queue without
a parent is a child of `root`: the Queue object of that name if there is one, else a
root implied here with no limits of its own. Jobs belong in leaf queues.

A tree that cannot be used as written is mended, never refused, and each mend is a
problem for the plugin to report as a Warning event on the queue: a parent that does
not exist, a cycle of parents, or a queue more than `MAX_DEPTH` levels down, makes the
queue a child of root (a parent given to root itself is ignored). (Volcano stops
scheduling for the whole cluster on such a tree, with a log line only; here the other
queues go on and the event says what was assumed.)
"""

from __future__ import annotations

from collections.abc import Mapping

from vscheduler.model import Queue

__all__ = ["MAX_DEPTH", "ROOT", "QueueTree"]

ROOT = "root"
# Queues deeper than this hang off root instead (Volcano's admission webhook allows 5
# levels by default): each keeps its ancestors, so a chain of thousands would cost
# their square.
MAX_DEPTH = 64


class QueueTree:
    """The parent, children and ancestors of every queue, and what had to be mended."""

    __slots__ = ("ancestors", "children", "parent", "problems")

    def __init__(self, queues: Mapping[str, Queue]) -> None:
        # queue -> its parent (root's is None), in the queues' order
        self.parent: dict[str, str | None] = {ROOT: None}
        # (queue, what was wrong and what is assumed), for Warning events
        self.problems: list[tuple[str, str]] = []
        for name, queue in queues.items():
            if name == ROOT:
                if queue.parent and queue.parent != ROOT:
                    self.problems.append((name, f"root has no parent; its parent "
                                                f"{queue.parent} is ignored"))
                continue
            parent = queue.parent or ROOT
            if parent != ROOT and parent not in queues:
                self.problems.append((name, f"parent queue {parent} does not exist; "
                                            f"taken as a child of {ROOT}"))
                parent = ROOT
            self.parent[name] = parent
        self._break_cycles()
        self.children: dict[str, list[str]] = {name: [] for name in self.parent}
        for name, parent in self.parent.items():
            if parent is not None:
                self.children[parent].append(name)
        # queue -> its ancestors, root first (the queue itself left out)
        self.ancestors: dict[str, tuple[str, ...]] = {ROOT: ()}
        for name in self.top_down():
            parent = self.parent[name]
            if parent is None:
                continue
            above = (*self.ancestors[parent], parent)
            if len(above) > MAX_DEPTH:
                self.problems.append((name, f"more than {MAX_DEPTH} levels below {ROOT}; "
                                            f"taken as a child of {ROOT}"))
                self.children[parent].remove(name)
                self.children[ROOT].append(name)
                self.parent[name] = ROOT
                above = (ROOT,)
            self.ancestors[name] = above

    def _break_cycles(self) -> None:
        """Queues whose parents lead back to themselves become children of root, each
        with a problem naming the cycle."""
        settled: set[str] = {ROOT}
        for start in list(self.parent):
            path: list[str] = []
            on_path: set[str] = set()
            name: str | None = start
            while name is not None and name not in settled:
                if name in on_path:
                    cycle = path[path.index(name):]
                    text = " -> ".join([*cycle, name])
                    for member in cycle:
                        self.problems.append((member, f"queue parents form a cycle "
                                                      f"({text}); taken as a child of "
                                                      f"{ROOT}"))
                        self.parent[member] = ROOT
                    break
                path.append(name)
                on_path.add(name)
                name = self.parent[name]
            settled.update(path)

    def is_leaf(self, name: str) -> bool:
        return not self.children.get(name)

    def top_down(self) -> list[str]:
        """Every queue, each after its parent."""
        order, stack = [], [ROOT]
        while stack:
            name = stack.pop()
            order.append(name)
            stack.extend(reversed(self.children[name]))
        return order

    def common_depth(self, left: str, right: str) -> int:
        """How deep the deepest queue both `left` and `right` descend from (or are)
        lies: 0 for root."""
        lpath = (*self.ancestors[left], left)
        rpath = (*self.ancestors[right], right)
        depth = 0
        for a, b in zip(lpath, rpath, strict=False):
            if a != b:
                break
            depth += 1
        return depth - 1

    def branch(self, name: str, depth: int) -> str:
        """The queue on `name`'s path at `depth` (root is 0), or `name` itself when
        it is not deeper."""
        path = (*self.ancestors[name], name)
        return path[depth] if depth < len(path) else name
