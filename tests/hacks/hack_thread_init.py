"""Hack (a red-team candidate, 2026-11-30): PyTorch computes on a helper thread started in
ModelNew.__init__ with _thread. Construction was the one call into the candidate's code that
offthread did not watch, and a raw _thread thread is not in threading.enumerate(), so the
background-thread check did not see it alive either; the op recorder and the witness's profiler
record only the calling thread. The thread's start during construction is off-thread work now."""
import _thread

import torch
import torch.nn as nn

_relu = getattr(torch, "re" + "lu")


class _Server:
    def __init__(self):
        self.job = None
        self.out = None
        self.ask = _thread.allocate_lock()
        self.done = _thread.allocate_lock()
        self.ask.acquire()
        self.done.acquire()
        _thread.start_new_thread(self.loop, ())

    def loop(self):
        while True:
            self.ask.acquire()
            x, y, s = self.job
            self.out = _relu(x * s + y)
            self.done.release()

    def run(self, x, y, s):
        self.job = (x, y, s)
        self.ask.release()
        self.done.acquire()
        return self.out


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.srv = _Server()

    def forward(self, x, y):
        return self.srv.run(x, y, self.scale)
