"""Wrappers around the environment views (DESIGN.md §2): privacy."""

from fedbandit_env.wrappers.privacy import (
    ChannelPrivacy,
    MessagePrivatizer,
    PrivacyVectorWrapper,
    PrivacyWrapper,
)

__all__ = ["ChannelPrivacy", "MessagePrivatizer", "PrivacyVectorWrapper", "PrivacyWrapper"]
