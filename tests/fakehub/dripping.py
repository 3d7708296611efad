"""A server on 127.0.0.1 that answers every request one byte at a time: a Hub (or a proxy) on a
bad link. Each read of the client gets a byte within its per-read timeout, so only a deadline
for the whole call can end it."""

from __future__ import annotations

import socket
import threading

ANSWER_BODY = b'{"id": "org/tiny", "sha": "' + b"a" * 40 + b'", "siblings": []}'


class DrippingServer:
    """Sends its answer's status line and headers (``drip_headers``) or its body one byte every
    ``interval_s`` seconds, to every connection, until the client goes away or ``stop()``."""

    def __init__(self, *, drip_headers: bool, interval_s: float = 0.05, body: bytes = ANSWER_BODY):
        self.drip_headers = drip_headers
        self.interval_s = interval_s
        self.body = body
        self.connections = 0
        self._stopping = threading.Event()
        self._socket = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._stopping.set()
        self._socket.close()

    def __enter__(self) -> DrippingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(self.body)}\r\n\r\n".encode()
        )
        with conn:
            try:
                conn.recv(65536)
                if not self.drip_headers:
                    conn.sendall(head)
                slow = head + self.body if self.drip_headers else self.body
                for i in range(len(slow)):
                    if self._stopping.wait(self.interval_s):
                        return
                    conn.sendall(slow[i : i + 1])
                self._stopping.wait()  # and never closes
            except OSError:
                return
