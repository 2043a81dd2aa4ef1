"""The `channels.web` block."""

from __future__ import annotations

from pydantic import Field

from aep_bridge import ChannelConfig


class WebConfig(ChannelConfig):
    """The web page's options; `approvers` must list `user` for the page to answer."""

    user: str = Field(
        default="local",
        description="the user id of whoever signs in to the page (list it in approvers)",
    )
    user_name: str = Field(default="you", description="the name the page's answers are shown by")
    signin_minutes: float = Field(
        default=15.0, gt=0, le=1440, description="how long the one-time sign-in code is good for"
    )
    signin_idle_hours: float = Field(
        default=12.0,
        gt=0,
        le=8760,
        description="a sign-in ends after this many hours with no page of it open or used",
    )
    signin_max_hours: float = Field(
        default=168.0,
        gt=0,
        le=8760,
        description="a sign-in ends this many hours after it began, in use or not",
    )
    signin_limit: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="the most browsers signed in at once (a new sign-in ends the least "
        "recently used one past it)",
    )

    def instructions_by_default(self) -> bool:
        """The page is signed in to by the operator alone."""
        return True
