"""A TCP proxy on loopback that cuts one connection after it has passed ``cut_after`` bytes back from
the server: a store's connection lost mid-object, for the code that must go on from where it stopped."""

from __future__ import annotations

import socket
import threading


class CutProxy:
    def __init__(self, upstream: tuple[str, int], cut_after: int) -> None:
        self.upstream, self.cut_after, self.cuts = upstream, cut_after, 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server, None), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, self.cuts == 0), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, cut: bool | None) -> None:
        sent = 0
        try:
            while data := src.recv(1 << 16):
                if cut and sent + len(data) > self.cut_after:
                    dst.sendall(data[: self.cut_after - sent])
                    self.cuts += 1
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (src, dst):  # either side gone: the other is closed too
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
