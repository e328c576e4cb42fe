"""Neural-network layers with PyTorch's names, arguments and parameter names."""

from .parameter import Buffer, Parameter
from .modules import *  # noqa: F401,F403
from . import functional, init  # noqa: F401
from .modules import module as _module

register_module_forward_pre_hook = _module.register_module_forward_pre_hook
register_module_forward_hook = _module.register_module_forward_hook
observe_module_calls = _module.observe_module_calls
