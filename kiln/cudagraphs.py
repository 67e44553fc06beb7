"""kiln.cudagraphs — replaying a compiled graph as a CUDA graph
(mode="reduce-overhead").

Consumes: a compiled graph's callable on a CUDA device that computes no
gradients.  Produces: CudaGraphed, which captures it on its second call and
replays it afterwards.
"""
import torch

from . import config, errors


class CudaGraphed:
    """A compiled graph replayed as a CUDA graph, as torch.compile's
    reduce-overhead mode does.

    The first call runs normally; the second records which inputs kept their
    address (parameters, buffers: read in place by the graph) and which moved
    (activations: copied into static buffers before each replay), then
    captures.  A replay whose in-place input has moved runs without the graph.
    Outputs are copied out of the graph's memory, so a result stays valid
    after the next call."""

    def __init__(self, fn, device):
        self.fn = fn
        self.device = device
        self.kiln_stats = getattr(fn, "kiln_stats", None)
        self.graph = None
        self.failed = False
        self.calls = 0
        self.first_ptrs = None

    @staticmethod
    def _ptrs(args):
        return [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]

    def _signature(self, args):
        """Sizes and strides of the inputs copied into static buffers (the only
        graphs wrapped take tensors only, and their in-place inputs keep their
        address; sizes are guarded by capture, this checks again cheaply)."""
        return [(args[i].shape, args[i].stride()) for i in self.copied]

    def __call__(self, *args):
        if self.graph is not None:
            return self._replay(args)
        self.calls += 1
        if self.failed or torch.is_grad_enabled() and any(getattr(a, "requires_grad", False) for a in args):
            return self.fn(*args)
        if self.calls == 1:
            self.first_ptrs = self._ptrs(args)
            return self.fn(*args)
        try:
            return self._capture(args)
        except Exception as e:  # capture is an optimisation: never fail the user's call
            if config.debug:
                raise
            errors.warn_once(f"kiln: CUDA graph capture failed, running without it: {type(e).__name__}: {e}")
            self.failed = True
            self.graph = None
            return self.fn(*args)

    def _capture(self, args):
        ptrs = self._ptrs(args)
        self.copied = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and ptrs[i] != self.first_ptrs[i]]
        self.signature = self._signature(args)
        self.static = list(args)
        for i in self.copied:   # same sizes and strides as the argument: the program was compiled for them
            a = args[i]
            self.static[i] = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
            self.static[i].copy_(a)
        self.inplace = [(i, ptrs[i]) for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in self.copied]
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.fn(*self.static)   # warm-up on the side stream, as CUDA graph capture wants
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.outputs = self.fn(*self.static)
        self.graph = graph
        return self._replay(args)

    def _replay(self, args):
        for i, p in self.inplace:
            if args[i].data_ptr() != p:
                return self.fn(*args)
        if self._signature(args) != self.signature:
            return self.fn(*args)
        for i in self.copied:
            self.static[i].copy_(args[i])
        self.graph.replay()
        out = self.outputs
        if isinstance(out, torch.Tensor):
            return out.clone()
        return type(out)(o.clone() if isinstance(o, torch.Tensor) else o for o in out)
