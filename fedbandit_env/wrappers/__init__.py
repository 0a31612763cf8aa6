"""Wrappers around the environment views (docs/architecture.md): privacy."""

from fedbandit_env.wrappers.privacy import (
    ChannelPrivacy,
    MessagePrivatizer,
    PrivacyVectorWrapper,
    PrivacyWrapper,
)

__all__ = ["ChannelPrivacy", "MessagePrivatizer", "PrivacyVectorWrapper", "PrivacyWrapper"]
