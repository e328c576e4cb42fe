"""PyTorch's ``torch.nn.functional`` names, on the flopcount runtime.

Each op family declares its functional API in ``__all__``; this module gathers them.
"""

from ..ops.activations import *  # noqa: F401,F403
from ..ops.attention import *  # noqa: F401,F403
from ..ops.cache import *  # noqa: F401,F403
from ..ops.conv import *  # noqa: F401,F403
from ..ops.dropout import *  # noqa: F401,F403
from ..ops.elementwise import *  # noqa: F401,F403
from ..ops.embedding import *  # noqa: F401,F403
from ..ops.indexing import *  # noqa: F401,F403
from ..ops.linalg import *  # noqa: F401,F403
from ..ops.loss import *  # noqa: F401,F403
from ..ops.movement import *  # noqa: F401,F403
from ..ops.nary import *  # noqa: F401,F403
from ..ops.norm import *  # noqa: F401,F403
from ..ops.pooling import *  # noqa: F401,F403
from ..ops.quantized import *  # noqa: F401,F403
from ..ops.reduction import *  # noqa: F401,F403
from ..ops.sampling import *  # noqa: F401,F403
from ..ops.selection import topk  # noqa: F401
