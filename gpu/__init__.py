"""dcop.gpu: the CuPy backend. The same table operations as ``dcop.backends.numpy.NumpyBackend`` on a CUDA
device: the paper's aggregation and elimination kernels, a fused join+eliminate generated per bucket
signature, chunked outputs with pinned memory and two streams, and binding to one device and stream.
``dcop.gpu.plan`` plans a bucket from its shapes alone (kernel choice, signature, metadata), so that
it can be tested without a GPU and its kernel compiled before the data arrive.

``import dcop.gpu`` works without CuPy or CUDA: CuPy is imported when a ``CupyBackend`` is built
(which raises ``dcop.errors.BackendUnavailable`` when CuPy or a device is missing), and kernels are
compiled on first use. Get the backend through ``dcop.backends.get_backend("cupy")``.
"""

from dcop.gpu.backend import CupyBackend, SetupStats, TransferStats

__all__ = ["CupyBackend", "SetupStats", "TransferStats"]
