"""The HTTP gateway: agents, their tools and policy, and non-interactive chat turns over aiohttp.

Imported only when `[gateway]` is configured (the daemon) or by tests.
"""

from orchestrator.gateway.server import GatewayAddress, GatewayError, open_gateway

__all__ = ["GatewayAddress", "GatewayError", "open_gateway"]
