"""An agent's CUDA IPC bookkeeping for one problem: which UTIL tables go to the parent by handle
and which as bytes, the buffers offered, mapped, taken and released, and the counts by path.

A GPU agent whose parent shares its CUDA IPC domain (same host, namespaces and GPU; the Setup
names each neighbour's) leaves its device UTIL tables on the GPU and sends their IPC handles
(:class:`~dcop.protocol.IpcTable`); the parent copies them at once (:mod:`dcop.gpu.ipc`). Once
the tree is chosen, a child offers its parent a buffer for its planned UTIL (:meth:`Handover.offer`)
which the parent maps while the child's subtree computes (:meth:`Handover.map_offer`); the UTIL
then carries offsets into it. The exported buffers live until the parent's VALUE or down message
(:meth:`Handover.parent_done`), or the end of the problem (:meth:`Handover.release`). A parent on
another GPU of the host takes them the same way where its device can access the child's (a
peer-to-peer copy), else the UTIL goes as bytes through pinned host memory; each UTIL's tables
are counted by the path they took (:meth:`Handover.figures`).

The :class:`~dcop.agents.session.Session` owns one :class:`Handover` and calls it; the device
work is the backend's :class:`~dcop.backends.base.IpcHandover` (None: every table as bytes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from dcop.backends.base import IpcBuffer, IpcHandover
from dcop.errors import DcopError, ProtocolError
from dcop.protocol import IpcTable, WireTable
from dcop.protocol.messages import Dtype
from dcop.tables import Table

#: Tables in an offered IPC buffer start at multiples of this (CUDA's allocation alignment).
IPC_ALIGN = 256


class Handover:
    """One agent's CUDA IPC hand-over state for one problem (see the module docstring).

    ``ipc`` is this agent's CUDA IPC domain (empty: it hands nothing over on the device),
    ``peers_ipc`` each linked agent's, ``names`` their variables (for errors); ``charge`` adds
    device time to the agent's clock.
    """

    def __init__(
        self,
        device: IpcHandover | None,
        ipc: str,
        peers_ipc: Mapping[int, str],
        names: Mapping[int, str],
        charge: Callable[[float], None],
    ) -> None:
        self.device = device
        self.ipc = ipc
        self.peers_ipc = peers_ipc
        self.names = names
        self.charge = charge
        #: my UTIL tables exported by CUDA IPC, kept until the parent cannot need them: the
        #: buffer offered to my parent ahead (:class:`~dcop.protocol.Offer`), and any others
        self.mailbox: IpcBuffer | None = None
        self.exported: list[IpcBuffer] = []
        #: children's offered buffers I mapped: child -> (handle, pointer, bytes)
        self.opened: dict[int, tuple[bytes, int, int]] = {}
        #: pointers of mapped buffers whose tables I took, unmapped once my UTIL went out
        self.taken: list[int] = []
        #: how UTILs go between a neighbour and me: (neighbour, I read) -> path
        self.paths: dict[tuple[int, bool], str] = {}
        #: tables and bytes of my UTIL by the path they took to my parent
        self.handed: dict[str, list[int]] = {}

    # ---- paths ----------------------------------------------------------------------------------
    def path(self, peer: int | None, reading: bool) -> str:
        """How a UTIL goes between ``peer`` and me (``reading``: I am the parent): ``ipc`` (one
        GPU), ``p2p`` (two GPUs of this host, the parent's able to read the child's), ``host``
        (two GPUs of this host without) or ``net`` (:func:`dcop.gpu.ipc.handover_path`)."""
        theirs = self.peers_ipc.get(peer, "") if peer is not None else ""
        if not self.ipc or peer is None or not theirs:
            return "net"
        key = (peer, reading)
        path = self.paths.get(key)
        if path is None:
            if self.device is not None:
                path = self.device.handover_path(self.ipc, theirs, reading)
            else:
                path = "ipc" if theirs == self.ipc else "net"
            self.paths[key] = path
        return path

    def shares_gpu(self, peer: int | None, reading: bool) -> bool:
        """Whether ``peer``'s UTIL and mine go by a CUDA IPC handle: one GPU, or two with peer
        access."""
        return self.device is not None and self.path(peer, reading) in ("ipc", "p2p")

    # ---- my UTIL, as a child ----------------------------------------------------------------
    def offer(self, parent: int | None, nbytes: int) -> IpcBuffer | None:
        """A buffer of ``nbytes`` for my planned UTIL, offered to ``parent`` where we share a
        GPU (None: we do not, or none could be made), so that mapping it is off the path from my
        subtree's tables to my parent's bucket."""
        if self.device is None or not self.shares_gpu(parent, False):
            return None
        t0 = time.perf_counter()
        box = self.device.offer_ipc(nbytes)
        self.charge(time.perf_counter() - t0)
        if box is not None:
            self.mailbox = box
        return box

    def pack(
        self,
        tables: Iterable[Table],
        parent: int | None,
        on_device: bool,
        to_numpy: Callable[[Any], np.ndarray],
    ) -> tuple[list[WireTable], list[IpcTable], list[IpcBuffer]]:
        """My UTIL's tables (those with a scope) as they go to ``parent``: into my offered
        buffer, else exported by a handle of their own where we share a GPU and the table is on
        the device (``on_device``: my bucket ran there), else framed as bytes. Returns the
        framed tables, the handed-over ones, and the buffers exported for them."""
        export = (
            self.device.export_ipc
            if on_device and self.device is not None and self.shares_gpu(parent, False)
            else None
        )
        wire: list[WireTable] = []
        shared: list[IpcTable] = []
        exported: list[IpcBuffer] = []
        offset = 0  # the next free byte of the offered buffer
        for t in tables:
            if not t.scope:
                continue
            exportable = export is not None and t.data.dtype in (np.float32, np.float64)
            dtype: Dtype = "<f4" if t.data.dtype == np.float32 else "<f8"
            size = int(t.data.size) * int(t.data.dtype.itemsize)
            box = self.mailbox
            if (
                exportable
                and box is not None
                and self.device is not None
                and offset + size <= box.nbytes
                and self.device.export_ipc_into(box, offset, t.data, False)
            ):
                shared.append(IpcTable(t.scope, tuple(t.data.shape), dtype, box.handle, offset))
                offset += -(-size // IPC_ALIGN) * IPC_ALIGN
                continue
            handed = export(t.data) if exportable and export is not None else None
            if handed is None:
                wire.append(WireTable.from_array(t.scope, to_numpy(t.data)))
            else:
                shared.append(IpcTable(t.scope, tuple(t.data.shape), dtype, handed.handle))
                exported.append(handed)
        return wire, shared, exported

    def count(
        self, parent: int | None, wire: Sequence[WireTable], shared: Sequence[IpcTable]
    ) -> None:
        """Count my UTIL's tables by path: handles by my parent's path (``ipc`` or ``p2p``),
        framed tables by ``host`` between GPU agents of one host (they went through host memory:
        a download, the local socket, an upload) or ``net``."""
        path = self.path(parent, False)
        for t in shared:
            self._handed(path, t.nbytes)
        for w in wire:
            if w.scope:
                self._handed("net" if path == "net" else "host", w.nbytes)

    def _handed(self, path: str, nbytes: int) -> None:
        tables, total = self.handed.get(path, [0, 0])
        self.handed[path] = [tables + 1, total + nbytes]

    def parent_done(self) -> None:
        """My parent's VALUE or down message came: it has used my UTIL."""
        self.mailbox, self.exported = None, []

    # ---- my children's UTILs, as a parent ---------------------------------------------------
    def map_offer(self, sender: int, handle: bytes, nbytes: int) -> None:
        """Map a child's offered UTIL buffer now, while its subtree still computes."""
        from dcop.gpu.ipc import IpcUnavailable

        if sender in self.opened:
            raise ProtocolError(f"an offer from {sender}, which is not a waiting child")
        if self.device is None or not self.shares_gpu(sender, True):
            raise ProtocolError(f"agent {sender} offered a CUDA IPC buffer; we share no GPU")
        t0 = time.perf_counter()
        try:
            pointer = self.device.open_ipc(handle, nbytes, self.peers_ipc.get(sender, ""))
        except IpcUnavailable as exc:
            raise self._lost_handle(sender, exc) from None
        self.opened[sender] = (handle, pointer, nbytes)
        self.charge(time.perf_counter() - t0)

    def take(self, sender: int, shared: Sequence[IpcTable]) -> list[Table]:
        """Copy a child's tables handed over by CUDA IPC onto my device (they stay there). The
        tables of its offered buffer are copied and checked with one wait; the buffer stays
        mapped until my own UTIL has gone out (:meth:`unmap_taken`), which takes the unmap
        (0.1-0.2 ms on the H200) off the path to my parent. The child keeps its buffer until my
        VALUE or down message reaches it, which comes later."""
        from dcop.gpu.ipc import IpcUnavailable

        device = self.device
        if device is None or not self.shares_gpu(sender, True):
            raise ProtocolError(f"agent {sender} handed over a UTIL by CUDA IPC; we share no GPU")
        peer = self.peers_ipc.get(sender, "")
        t0 = time.perf_counter()
        mapped = self.opened.pop(sender, None)
        handle, pointer, size = mapped if mapped is not None else (None, 0, 0)
        if mapped is not None:
            self.taken.append(pointer)
        in_buffer = [t for t in shared if t.handle == handle]
        for t in shared:
            if t.handle == handle and t.offset + t.nbytes > size:
                raise ProtocolError(f"agent {sender}'s table overruns its offered buffer")
            if t.handle != handle and t.offset:
                raise ProtocolError(f"agent {sender} names an offset in a buffer not offered")
        placed = [(t.offset, t.shape, t.dtype) for t in in_buffer]
        copies = iter(device.read_ipc_tables(pointer, placed) if in_buffer else [])
        out = []
        for t in shared:
            if t.handle == handle:
                data = next(copies)
            else:
                try:
                    data = device.import_ipc(t.handle, t.shape, t.dtype, peer)
                except IpcUnavailable as exc:
                    raise self._lost_handle(sender, exc) from None
            out.append(Table(t.scope, data))
        self.charge(time.perf_counter() - t0)  # device copies, like an upload of bytes
        return out

    def _lost_handle(self, sender: int, exc: Exception) -> DcopError:
        name = self.names.get(sender, "?")
        return DcopError(
            f"the UTIL of agent {sender} ({name}) on the GPU: {exc}; did agent {sender} exit?"
        )

    def unmap_taken(self) -> None:
        """Unmap the children's buffers whose tables I took (my UTIL has gone out, or I am the
        root and my VALUEs have not yet): still my work, so charged to my clock."""
        if not self.taken or self.device is None:
            return
        t0 = time.perf_counter()
        for pointer in self.taken:
            self.device.close_ipc(pointer)
        self.taken = []
        self.charge(time.perf_counter() - t0)

    def release(self) -> None:
        """The problem ends: unmap children's buffers I still hold, drop the ones I exported."""
        if self.device is not None:
            for pointer in [*self.taken, *(p for _, p, _ in self.opened.values())]:
                self.device.close_ipc(pointer)
        self.opened, self.taken = {}, []
        self.mailbox, self.exported = None, []

    def figures(self) -> dict[str, float]:
        """My UTIL's tables and bytes by the path they took to my parent, for my metrics:
        ``handover_<path>_tables`` and ``handover_<path>_bytes``."""
        out: dict[str, float] = {}
        for path, (tables, nbytes) in self.handed.items():
            out[f"handover_{path}_tables"] = tables
            out[f"handover_{path}_bytes"] = nbytes
        return out
