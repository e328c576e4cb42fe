"""Neural-network layers with PyTorch's names, arguments and parameter names."""

from .parameter import Buffer, Parameter
from .modules import *  # noqa: F401,F403
from . import functional, init  # noqa: F401
from .modules.hooks import (hooks_active, observe_module_calls, register_module_forward_hook,  # noqa: F401
                            register_module_forward_pre_hook)
