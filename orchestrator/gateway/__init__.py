"""The HTTP gateway: agents, their tools and policy, and non-interactive chat turns over aiohttp.

Imported only when `[gateway]` is configured (the daemon) or by tests.
"""

from orchestrator.gateway.server import GatewayAddress, GatewayError, open_gateway
from orchestrator.gateway.state import GatewayHost

__all__ = ["GatewayAddress", "GatewayError", "GatewayHost", "open_gateway"]
