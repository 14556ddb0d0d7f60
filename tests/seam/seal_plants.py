"""The seal scanner's self-tests as data: planted bypasses each rule must catch, and code it must pass.

A `Plant` is a module source at a path; `tests/seam/test_architecture.py` runs its rule on it.
Copy, pickle, `__new__`, subclassing and objects made around a constructor are refused by
the sealed classes at run time instead: tests/seam/test_seal_runtime.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.seam.seal_scan import SEAM

OUTSIDE = "orchestrator/engine/planted.py"


@dataclass(frozen=True)
class Plant:
    """A bypass planted in a module at `rel`; `rule` must report a line containing `expected`."""

    rule: str
    source: str | bytes
    expected: str
    rel: str = OUTSIDE


IMPORT_SEAL = "from orchestrator.seam._seal import SEAL"
PLANTED = (
    # The seal token's module, however it is imported.
    Plant("private_modules", IMPORT_SEAL, "imports orchestrator.seam._seal"),
    Plant("private_modules", "from orchestrator.seam import _seal as x", "imports orchestrator.seam._seal"),
    Plant("private_modules", "import orchestrator.seam._seal as s", "imports orchestrator.seam._seal"),
    Plant("private_modules", "from orchestrator.seam._seal import *", "imports orchestrator.seam._seal"),
    Plant("private_modules", "from ..seam import _seal", "imports orchestrator.seam._seal"),
    Plant("private_modules", "from .seam._seal import SEAL", "imports orchestrator.seam._seal",
          rel="orchestrator/planted.py"),
    Plant("private_modules", "import importlib\ns = importlib.import_module('orchestrator.seam._seal')",
          "imports orchestrator.seam._seal"),
    Plant("private_modules", "import importlib\ns = importlib.import_module('orchestrator.seam.' + '_seal')",
          "imports orchestrator.seam._seal"),
    Plant("private_modules", "s = __import__('orchestrator.seam._seal', fromlist=['SEAL'])",
          "imports orchestrator.seam._seal"),
    Plant("private_modules", "import builtins\ns = getattr(builtins, '__import__')('orchestrator.seam._seal')",
          "imports orchestrator.seam._seal"),
    Plant("private_modules", "import importlib\ns = importlib.import_module(f\"orchestrator.{'seam'}._seal\")",
          "imports orchestrator.seam._seal"),
    Plant("private_modules", "import importlib as il\ns = il.import_module('.'.join(['orchestrator', 'seam', '_seal']))",
          "imports orchestrator.seam._seal"),
    Plant("private_modules", "import importlib.util\nspec = importlib.util.spec_from_file_location('s', "
          "'orchestrator/seam/_seal.py')", "imports orchestrator.seam._seal"),
    Plant("private_modules", "import sys\ns = sys.modules['orchestrator.seam._seal']", "imports orchestrator.seam._seal"),
    # Look-alikes: identifiers and strings are NFKC-normalised as the interpreter normalises
    # identifiers; a folder that only looks like the seam is not the seam.
    Plant("private_modules", "from \uff4frchestrator.seam._seal import SEAL", "imports orchestrator.seam._seal"),
    Plant("private_modules", "import importlib\ns = importlib.import_module('\uff4frchestrator.seam._seal')",
          "imports orchestrator.seam._seal"),
    Plant("private_modules", IMPORT_SEAL, "imports orchestrator.seam._seal", rel="orchestrator/seam_/planted.py"),
    Plant("private_modules", IMPORT_SEAL, "imports orchestrator.seam._seal", rel="orchestrator/\uff53eam/planted.py"),
    Plant("private_modules", IMPORT_SEAL, "imports orchestrator.seam._seal", rel="orchestrator/seamless.py"),
    # A coding cookie: read as text this is a harmless name, imported it is the token's module.
    Plant("private_modules", b"# coding: utf-7\nimport importlib\ns = importlib.import_module('orchestrator.seam.+AF8-seal')\n",
          "imports orchestrator.seam._seal"),
    Plant("private_modules", "from orchestrator.config.models import Config", "imports orchestrator.config.models"),
    Plant("private_modules", "from orchestrator.config import models", "imports orchestrator.config.models"),
    # Imports by a name nothing constant builds.
    Plant("dynamic_imports", "import base64, importlib\nm = importlib.import_module(base64.b64decode(b'b3Jj').decode())",
          "imports a module by a computed name"),
    Plant("dynamic_imports", "from importlib import import_module\ndef f(name):\n    return import_module(name)",
          "imports a module by a computed name"),
    Plant("dynamic_imports", "import runpy\ndef f(name):\n    runpy.run_module(name)", "imports a module by a computed name"),
    Plant("dynamic_imports", "import sys\nt = sys.modules['orchestrator.seam.execution']", "reads sys.modules"),
    Plant("dynamic_imports", "import sys\nt = getattr(sys, 'modules')", "reads sys.modules"),
    Plant("dynamic_imports", "from sys import modules\nt = modules", "reads sys.modules"),
    Plant("dynamic_imports", "import sys\nsys.path.insert(0, '/tmp/evil')", "reads sys.path"),
    Plant("dynamic_imports", "from orchestrator import seam\nseam.__path__.insert(0, '/tmp/evil')",
          "reaches the import machinery (__path__)"),
    Plant("dynamic_imports", "import sys\nsys.meta_path.insert(0, finder)", "reaches the import machinery (meta_path)"),
    # The token by name, wherever it is re-exported or however its name is built.
    Plant("token_outside_the_seam", "from orchestrator.seam.execution import SEAL", "names the seal's SEAL"),
    Plant("token_outside_the_seam", "from orchestrator.seam import registry\ntoken = registry.SEAL", "names the seal's SEAL"),
    Plant("token_outside_the_seam", "token = getattr(module, 'SE' + 'AL')", "names the seal's SEAL"),
    Plant("token_outside_the_seam", "token = vars(module)[''.join(['S', 'E', 'A', 'L'])]", "names the seal's SEAL"),
    Plant("token_outside_the_seam", "token = getattr(module, 'LAES'[::-1])", "names the seal's SEAL"),
    Plant("token_outside_the_seam", "token = getattr(module, chr(83) + 'EAL')", "names the seal's SEAL"),
    Plant("token_outside_the_seam", "token = getattr(module, '%sAL' % 'SE')", "names the seal's SEAL"),
    Plant("token_outside_the_seam", "token = getattr(module, '{}AL'.format('SE'))", "names the seal's SEAL"),
    Plant("token_outside_the_seam", "token = getattr(module, 'seal'.upper())", "names the seal's SEAL"),
    Plant("token_outside_the_seam", "from orchestrator.seam.execution import \uff33\uff25\uff21\uff2c",
          "names the seal's SEAL"),
    Plant("token_outside_the_seam", "from orchestrator.seam import execution\nexecution.vouch(forged)",
          "names the seal's vouch"),
    Plant("token_outside_the_seam", "import pydoc\ntoken = pydoc.locate('orchestrator.seam.execution.SEAL')",
          "names the seal's SEAL"),
    Plant("token_outside_the_seam", "import pkgutil\ntoken = pkgutil.resolve_name('orchestrator.seam.registry:SEAL')",
          "names the seal's SEAL"),
    # Inside the seam the token is never stored or handed to anything but a sealed constructor.
    Plant("token_inside_the_seam", "def token():\n    return SEAL", "hands the seal token on (Return)",
          rel="orchestrator/seam/planted.py"),
    Plant("token_inside_the_seam", "CACHE = SEAL", "hands the seal token on (Assign)", rel="orchestrator/seam/planted.py"),
    Plant("token_inside_the_seam", "callback(SEAL)", "hands the seal token on (Call)", rel="orchestrator/seam/planted.py"),
    Plant("token_inside_the_seam", "make = functools.partial(ScopedToolRegistry, seal=SEAL)",
          "hands the seal token on (keyword)", rel="orchestrator/seam/planted.py"),
    # Re-sealing through a constructor or replace().
    Plant("seal_keyword", "ex = dataclasses.replace(execution, tools=mine, seal=token)", "passes seal="),
    Plant("seal_keyword", "ScopedToolRegistry.__init__(reg, tools={}, prompt_sections=(), seal=s)", "passes seal="),
    Plant("seal_keyword", "ex = replace(execution, **{'seal': token, 'tools': mine})", "passes seal="),
    Plant("seal_keyword", "ex = replace(execution, **{'se' + 'al': token})", "passes seal="),
    # The token's hiding places: function globals, closures, frames, the collector, raw memory.
    Plant("introspection", "token = ResolvedAgentExecution.__post_init__.__globals__['SEAL']", "reaches __globals__"),
    Plant("introspection", "g = getattr(ScopedToolRegistry.__init__, '__glob' + 'als__')", "reaches __globals__"),
    Plant("introspection", "import sys\nseal = sys._getframe(1).f_locals['seal']", "reaches f_locals"),
    Plant("introspection", "import inspect\ng = inspect.currentframe().f_back.f_globals", "reaches f_globals"),
    Plant("introspection", "import gc\nholders = gc.get_referrers(SealViolation)", "reaches get_referrers"),
    Plant("introspection", "import ctypes\nobj = ctypes.cast(address, ctypes.py_object).value", "reaches py_object"),
    Plant("introspection", "cell = check.__closure__[0].cell_contents", "reaches __closure__"),
    Plant("introspection", "defaults = ScopedToolRegistry.__init__.__kwdefaults__", "reaches __kwdefaults__"),
    Plant("introspection", "import inspect\nm = inspect.getmodule(ResolvedAgentExecution)", "reaches getmodule"),
    Plant("introspection", "import inspect\nfrom orchestrator.seam import execution\n"
          "token = dict(inspect.getmembers(execution))['SE' 'AL']", "reaches getmembers"),
    Plant("introspection", "try:\n    make()\nexcept SealViolation as e:\n    g = e.__traceback__.tb_frame.f_globals",
          "reaches tb_frame"),
    # Code from strings.
    Plant("dynamic_code", "exec('from orchestrator.seam._seal import SEAL')", "runs code from a string (exec)"),
    Plant("dynamic_code", "value = eval(compile(text, 'x', 'eval'))", "runs code from a string (eval)"),
    Plant("dynamic_code", "run = exec\nrun(code)", "runs code from a string (exec)"),
    Plant("dynamic_code", "import builtins\ngetattr(builtins, 'ex' + 'ec')(code)", "runs code from a string (exec)"),
    Plant("dynamic_code", "import builtins\nbuiltins.eval(code)", "runs code from a string (eval)"),
    Plant("dynamic_code", "import marshal, types\nf = types.FunctionType(marshal.loads(blob), {})", "imports marshal"),
    Plant("dynamic_code", "import runpy", "imports runpy"),
    # Writing a frozen object's fields past its own __setattr__.
    Plant("setattr_bypass", "object.__setattr__(execution, 'tools', mine)", "reaches __setattr__"),
    Plant("setattr_bypass", "object.__setattr__(runtime.execution.approvals, '_autonomy', 'full')", "reaches __setattr__"),
    Plant("setattr_bypass", "s = object.__setattr__\ns(execution, 'tools', mine)", "reaches __setattr__"),
    Plant("setattr_bypass", "type.__setattr__(ResolvedAgentExecution, '__post_init__', noop)", "reaches __setattr__"),
    Plant("setattr_bypass", "super(ScopedToolRegistry, reg).__setattr__('_by_name', {})", "reaches __setattr__"),
    Plant("setattr_bypass", "class T:\n    def f(self, other):\n        object.__setattr__(other, 'x', 1)",
          "reaches __setattr__"),
    Plant("setattr_bypass", "def poke(execution):\n    object.__setattr__(execution, 'tools', mine)", "reaches __setattr__"),
    Plant("setattr_bypass", "class T:\n    def poke(self):\n        object.__setattr__(self, 'tools', mine)\n"
          "T.poke(execution)", "reaches __setattr__"),
    Plant("setattr_bypass", "class T:\n    def __post_init__(self):\n        self = execution\n"
          "        object.__setattr__(self, 'tools', mine)", "reaches __setattr__"),
    Plant("setattr_bypass", "getattr(object, '__set' + 'attr__')(execution, 'tools', mine)", "reaches __setattr__"),
    Plant("setattr_bypass", "object.__delattr__(execution, 'tools')", "reaches __delattr__"),
    Plant("setattr_bypass", "import operator\noperator.methodcaller('__setattr__', 'tools', mine)(execution)",
          "reaches __setattr__"),
    Plant("slot_descriptors", "ScopedToolRegistry._by_name.__set__(reg, {'shell': tool})", "(__set__)"),
    Plant("slot_descriptors", "import inspect\ninspect.getattr_static(ApprovalManager, 'autonomy').__set__(m, 'full')",
          "(getattr_static)"),
    Plant("slot_descriptors", "ResolvedAgentExecution.tools.__delete__(execution)", "(__delete__)"),
    Plant("instance_dicts", "agents = config.__dict__['agents']", "reaches __dict__"),
    Plant("instance_dicts", "vars(execution)['tools'] = mine", "calls vars()"),
    Plant("instance_dicts", "execution.security.__dict__.update(autonomy='full')", "reaches __dict__"),
    Plant("class_swaps", "forged.__class__ = ResolvedAgentExecution", "reaches __class__"),
    Plant("class_swaps", "setattr(forged, '__cl' + 'ass__', ResolvedAgentExecution)", "reaches __class__"),
    Plant("class_swaps", "base = reg.__class__.__mro__[1]", "reaches __mro__"),
    Plant("class_swaps", "twin = execution.__class__(**fields)", "reaches __class__"),
    Plant("class_swaps", "twin = execution.__class__.__name__.__class__", "reaches __class__"),
    # Building a sealed object outside the seam.
    Plant("constructs_sealed", "reg = ScopedToolRegistry(tools={})", "constructs ScopedToolRegistry"),
    Plant("constructs_sealed", "Reg = ScopedToolRegistry\nreg = Reg(tools={}, prompt_sections=(), seal=s)",
          "constructs ScopedToolRegistry"),
    Plant("constructs_sealed", "from orchestrator.seam import ScopedToolRegistry as Tools\nreg = Tools(tools={})",
          "constructs ScopedToolRegistry"),
    Plant("constructs_sealed", "twin = type(execution)(**fields)", "constructs through type(...)"),
    Plant("constructs_sealed", "forged = ResolvedAgentExecution.__new__(ResolvedAgentExecution)", "reaches __new__"),
    Plant("constructs_sealed", "forged = object.__new__(ResolvedAgentExecution)", "reaches __new__"),
    Plant("constructs_sealed", "ApprovalManager.__init__(manager, agent='a', autonomy='full')",
          "calls __init__ on an existing object"),
    Plant("constructs_sealed", "class T:\n    def __post_init__(self):\n        object.__setattr__(self, 'tools', mine)\n"
          "T.__post_init__(execution)", "calls __post_init__ on an existing object"),
    Plant("constructs_sealed", "init = super(ApprovalManager, manager).__init__", "calls __init__ on an existing object"),
    Plant("constructs_sealed", "class T:\n    def m(self, execution):\n        ResolvedAgentExecution.__init__(execution, seal=s)",
          "calls __init__ on an existing object"),
    Plant("constructs_sealed", "class T:\n    def m(self):\n        self = execution\n        Base.__init__(self)",
          "calls __init__ on an existing object"),
    Plant("constructs_sealed", "import functools\nmake = functools.partial(ApprovalManager, agent='a')",
          "hands on the class ApprovalManager"),
    # Cloning a sealed value around its own refusal (copy and pickle: tests/seam/test_seal_runtime.py).
    Plant("copies", "import copyreg\ncopyreg.pickle(ResolvedAgentExecution, reducer)", "imports copyreg"),
    Plant("copies", "from copyreg import dispatch_table\ndispatch_table[ResolvedAgentExecution] = reducer", "imports copyreg"),
    Plant("copies", "state = execution.__reduce_ex__(4)", "reaches __reduce_ex__"),
    Plant("copies", "twin = ResolvedAgentExecution.__copy__(execution)", "reaches __copy__"),
    Plant("copies", "execution.__setstate__((None, {'tools': mine}))", "reaches __setstate__"),
    Plant("subclasses_sealed", "class Mine(ScopedToolRegistry):\n    pass", "subclasses ScopedToolRegistry"),
    Plant("subclasses_sealed", "Mine = type('Mine', (ApprovalManager,), {})", "subclasses ApprovalManager"),
    Plant("subclasses_sealed", "from orchestrator import seam\nclass Mine(seam.ResolvedAgentExecution): ...",
          "subclasses seam.ResolvedAgentExecution"),
    Plant("subclasses_sealed", "import types\nMine = types.new_class('Mine', (ScopedToolRegistry,))",
          "subclasses ScopedToolRegistry"),
    # Rebinding what the engine's check, the constructors or the seam look up.
    Plant("patches", "from orchestrator.engine import loop\nloop.ResolvedAgentExecution = Impostor", "rebinds"),
    Plant("patches", "import orchestrator.seam.execution as ex\nex.SEAL = mine", "rebinds ex.SEAL"),
    Plant("patches", "from orchestrator.seam import ResolvedAgentExecution\n"
          "ResolvedAgentExecution.__post_init__ = lambda self, seal: None", "rebinds"),
    Plant("patches", "from orchestrator.seam import ApprovalManager\nsetattr(ApprovalManager, 'rule_for', allow_all)",
          "rebinds"),
    Plant("patches", "import orchestrator.engine.loop\ndel orchestrator.engine.loop.SealViolation", "rebinds"),
    Plant("patches", "from orchestrator.engine import loop as engine\nengine.run_tool_call_loop = mine", "rebinds"),
    Plant("patches", "from orchestrator.seam import PATH_PROFILES\nPATH_PROFILES[path] = wide", "rebinds"),
    Plant("patches", "type(execution).minted = staticmethod(lambda candidate: True)", "rebinds"),
    Plant("patches", "setattr(type(execution), 'minted', staticmethod(lambda candidate: True))", "rebinds"),
    Plant("patches", "from orchestrator.engine import loop\ndef swap(m):\n    m.ResolvedAgentExecution = Impostor\n"
          "swap(loop)", "hands the module loop on"),
    Plant("computed_lookups", "import codecs\nagents = getattr(config, codecs.decode('ntragf', 'rot13'))",
          "looks up a computed name on config"),
    Plant("computed_lookups", "from orchestrator import seam\ndef f(name):\n    return getattr(seam, name)",
          "looks up a computed name on seam"),
    Plant("computed_lookups", "def __getattr__(name):\n    if name in ALLOWED:\n        pass\n"
          "    return getattr(library, name)\nfrom orchestrator import library", "looks up a computed name on library"),
    # Agent policy read outside the seam.
    Plant("policy_reads", "policy = config.agents['ops'].excluded_tools", "indexes"),
    Plant("policy_reads", "policy = runtime.config.agents[name]", "indexes"),
    Plant("policy_reads", "agent = config.agents.get('ops')", "agents.get()"),
    Plant("policy_reads", "for name, agent in cfg.agents.items(): pass", "agents.items()"),
    Plant("policy_reads", "for agent in config.agents.values(): print(agent.tools)", "agents.values()"),
    Plant("policy_reads", "agents = dict(config.agents)", "passes config.agents to dict()"),
    Plant("policy_reads", "a = getattr(self.config.agents, 'ops')", "passes config.agents to getattr()"),
    Plant("policy_reads", "a = next(iter(config.agents)); print(a.mcp_bundles)", "reads .mcp_bundles"),
    Plant("policy_reads", "from orchestrator.config.models import AgentConfig", "imports AgentConfig"),
    Plant("policy_reads", "from ..config import AgentConfig", "imports AgentConfig"),
    Plant("policy_reads", "x = [a.budget for a in config.agents]", "reads .budget"),
    Plant("policy_reads", "agents = getattr(config, 'agents')", "reads 'agents' through getattr()"),
    Plant("policy_reads", "agents = getattr(config, 'ag' + 'ents')", "reads 'agents' through getattr()"),
    Plant("policy_reads", "agents = getattr(config, f\"{'ag'}ents\")", "reads 'agents' through getattr()"),
    Plant("policy_reads", "agents = getattr(config, ''.join(['ag', 'ents']))", "reads 'agents' through getattr()"),
    Plant("policy_reads", "agents = getattr(config, '\uff41gents')", "reads 'agents' through getattr()"),
    Plant("policy_reads", "import operator\nagents = operator.attrgetter('agents')(config)",
          "reads 'agents' through .attrgetter()"),
    Plant("policy_reads", "from operator import attrgetter\ntools = attrgetter('agents.ops.tools')(config)",
          "reads 'agents' through attrgetter()"),
    Plant("policy_reads", "agents = config.__getattribute__('agents')", "reads 'agents' through .__getattribute__()"),
    Plant("policy_reads", "agents = config.__dict__['agents']", "indexes ['agents']"),
    Plant("policy_reads", "agents = config.model_dump()['agents']", "indexes ['agents']"),
    Plant("policy_reads", "ops = runtime.config.model_dump().get('agents')", "reads 'agents' through .get()"),
    Plant("policy_reads", "for key, value in config.model_dump().items():\n    pass", "dumps or rebuilds the config (model_dump)"),
    Plant("policy_reads", "raw = dict(config)", "dumps or rebuilds the config (dict(...))"),
    Plant("policy_reads", "for key, value in cfg:\n    pass", "iterates over the config"),
    Plant("policy_reads", "wide = config.model_copy(update={'agents': {}})", "dumps or rebuilds the config (model_copy)"),
    Plant("policy_reads", "wide = Config.model_construct(agents={})", "dumps or rebuilds the config (model_construct)"),
    Plant("policy_reads", "fields = dict(config.__repr_args__())", "dumps or rebuilds the config (__repr_args__)"),
    Plant("policy_reads", "import functools\ntools = functools.reduce(getattr, ['agents', 'ops', 'tools'], config)",
          "reads 'agents' through getattr handed to functools.reduce()"),
    Plant("policy_reads", "import functools\npath = ('ag' + 'ents', 'ops')\ntools = functools.reduce(getattr, path, cfg)",
          "reads 'agents' through getattr handed to"),
    Plant("policy_reads", "helper(agents=config.agents)", "passes config.agents as agents="),
    Plant("policy_reads", "helper(x, agents=self.runtime.config.agents)", "passes config.agents as agents="),
    Plant("policy_reads", "c = runtime.config\nhelper(agents=c.agents)", "passes config.agents as agents="),
    Plant("policy_reads", "def f(c: Config) -> None:\n    helper(agents=c.agents)", "passes config.agents as agents="),
    Plant("policy_reads", "from orchestrator.daemon.runtime import live\nt = live.agents['ops'].tools",
          "indexes config.agents"),
    Plant("policy_reads", "tools = (a := config.agents)['ops']", "uses config.agents (NamedExpr)"),
    Plant("policy_reads", "match config.agents:\n    case {'ops': a}:\n        pass", "uses config.agents (Match)"),
    # resolve() held, imported or looked up instead of called through the path's builder.
    Plant("reaches_resolve", "ex = resolve(config, 'a', path=p, services=s)", "calls resolve()"),
    Plant("reaches_resolve", "ex = seam.resolve(config, 'a')", "calls resolve()"),
    Plant("reaches_resolve", "from orchestrator.seam import resolve as build", "imports resolve"),
    Plant("reaches_resolve", "from orchestrator import seam\nf = seam.resolve", "reaches resolve()"),
    Plant("reaches_resolve", "import functools\nfrom orchestrator import seam as s\nf = functools.partial(s.resolve, config)",
          "reaches resolve()"),
    Plant("reaches_resolve", "import orchestrator.seam.resolve as r\nex = r.resolve(config, 'a')", "imports resolve"),
    Plant("reaches_resolve", "from orchestrator import seam\nex = getattr(seam, 'res' + 'olve')(config, 'a')",
          "reaches resolve()"),
    Plant("reaches_resolve", "from orchestrator import seam\nex = seam.__getattribute__('resolve')(config, 'a')",
          "reaches resolve()"),
    Plant("reaches_resolve", "import importlib\nex = importlib.import_module('orchestrator.seam').resolve(config, 'a')",
          "reaches resolve()"),
    Plant("reaches_resolve", "from orchestrator.seam import *", "imports resolve (with *)"),
    Plant("reaches_resolve", "import pydoc\nbuild = pydoc.locate('orchestrator.seam.resolve')", "reaches resolve()"),
    Plant("reaches_resolve", "import operator\nex = operator.methodcaller('resolve', config, 'a')(seam)",
          "reaches resolve() by its name"),
    Plant("channel_imports", "from orchestrator.policy import SecurityPolicy", "imports orchestrator.policy",
          rel="channels/planted.py"),
    Plant("channel_imports", "from ..orchestrator.seam import build_channel", "imports orchestrator.seam",
          rel="channels/planted.py"),
    Plant("channel_imports", "import importlib\nt = importlib.import_module('orchestrator.' + 'tools')",
          "imports orchestrator.tools", rel="channels/planted.py"),
)


# (rule, module path, source): code each rule must let pass.
ALLOWED = (
    ("policy_reads", OUTSIDE, "n = len(config.agents)\nnames = sorted(self.config.agents)\nok = name in config.agents\n"
     "for name in sorted(config.agents): print(name)\nstore.recall(q, agents=self.agents)\n"
     "print(json.dumps({'agents': grids}))\nfrom orchestrator.gateway import handlers\napp.add(handlers.agents)\n"),
    ("private_modules", SEAM + "planted.py", IMPORT_SEAL),
    ("private_modules", OUTSIDE, "from orchestrator.config import Config, SecretRef"),
    ("token_inside_the_seam", SEAM + "planted.py",
     "reg = ScopedToolRegistry(tools={}, prompt_sections=(), seal=SEAL)\nif seal is not SEAL:\n    raise SealViolation('x')"),
    ("setattr_bypass", OUTSIDE, "class T:\n    def __post_init__(self) -> None:\n        object.__setattr__(self, '_wire', 1)\n"),
    ("constructs_sealed", OUTSIDE, "ok = isinstance(execution, ResolvedAgentExecution)\nsuper().__init__(message)\n"
     "class E(Base):\n    def __init__(self, x):\n        Base.__init__(self, x)\n        super(E, self).__init__(x)\n"),
    ("class_swaps", OUTSIDE, "shown = f'{self.__class__.__name__}: {exc.__class__.__qualname__}'"),
    ("dynamic_imports", "channels/__init__.py", "import importlib\nADAPTERS = MappingProxyType({'t': 'channels.telegram'})\n"
     "m = importlib.import_module(ADAPTERS[kind])"),
    ("dynamic_code", OUTSIDE, "import re\npattern = re.compile('x')\nproc = await asyncio.create_subprocess_exec(*argv)"),
    ("computed_lookups", OUTSIDE, "from orchestrator import library\ndef __getattr__(name):\n"
     "    if name in ('Agent', 'Attachment'):\n        return getattr(library, name)\n"),
    ("patches", OUTSIDE, "self.state = 1\nsymbols.link = ''\nsetattr(symbols, f'heading_{n}', '')"),
    ("reaches_resolve", OUTSIDE, "root = path.resolve()\nex = build_channel(config, 'a', services)"),
    ("channel_imports", "channels/planted.py", "from orchestrator.config import Config\nfrom orchestrator.seamless import x"),
)
