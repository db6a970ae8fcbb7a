"""The package's public names are re-exported where callers look for them."""

import diagnose_svc.policies
from diagnose_svc.policies import openai_compat


def test_policies_package_exports_the_openai_policy() -> None:
    """diagnose_svc.policies exports OpenAICompatPolicy and ModelUnavailable, the same
    objects as in their module, and every name in __all__ exists."""
    assert diagnose_svc.policies.OpenAICompatPolicy is openai_compat.OpenAICompatPolicy
    assert diagnose_svc.policies.ModelUnavailable is openai_compat.ModelUnavailable
    assert all(hasattr(diagnose_svc.policies, name) for name in diagnose_svc.policies.__all__)


def test_exceptions_belong_to_the_service_tree() -> None:
    """ModelUnavailable is a PolicyError (the run ends with a note) and ModelSettingsError
    a ConfigError (the daemon exits with EX_CONFIG): the top-level handler maps them."""
    from diagnose_svc.errors import ConfigError, PolicyError
    from diagnose_svc.model_settings import ModelSettingsError

    assert issubclass(openai_compat.ModelUnavailable, PolicyError)
    assert issubclass(ModelSettingsError, ConfigError)
    assert openai_compat.ModelUnavailable("m", "h", status=503).status == 503
