"""`base: {build: {context, dockerfile, args}}`: a sandbox image built from a Dockerfile.

The context is a directory relative to the spec file; the CLI uploads its files with the spec
(like fixture files) and the daemon builds from those (daemon/sandbox/build.py), never from a
path on its own host. Build arguments end up in the image's history, readable by anyone who can
run the image, so they are never secrets: a name that looks like one is refused unless the spec
lists it under `args_not_secret`.
"""
from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Discriminator, Field, Tag, model_validator

from .types import Duration, ImageRef, NonEmptyStr, SpecModel

SECRET_LIKE = re.compile(r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|PRIVATE|CERT", re.IGNORECASE)
ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def context_key(value: str, what: str = "build context") -> str:
    """A path relative to the spec file's directory in the form uploads are stored ('/'-separated,
    no '.' parts; '.' for the directory itself). Raises ValueError when it is absolute or leaves
    the spec's directory."""
    text = value.strip().replace("\\", "/")
    if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text):
        raise ValueError(f"{what} '{value}' is absolute: it is relative to the spec file's directory "
                         "(the svc CLI uploads it with the spec)")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"{what} '{value}' leaves the spec's directory ('..' is not allowed): a build reads "
                         "nothing outside its context")
    return "/".join(parts) or "."


def _context(value: str) -> str:
    context_key(value)
    return value


def _dockerfile(value: str) -> str:
    key = context_key(value, "dockerfile")
    if key == ".":
        raise ValueError("dockerfile names a file inside the build context, e.g. Dockerfile")
    return value


class Build(SpecModel):
    """How to build the sandbox image. `context` is relative to the spec file, `dockerfile` to the
    context (default `Dockerfile`); `args` are `--build-arg`s, never secrets."""

    context: Annotated[NonEmptyStr, AfterValidator(_context)] = "."
    dockerfile: Annotated[NonEmptyStr, AfterValidator(_dockerfile)] = "Dockerfile"
    args: dict[str, str] = Field(default_factory=dict)
    args_not_secret: list[str] = Field(default_factory=list)
    """Argument names that look like secrets (KEY, TOKEN, PASSWORD...) but are not: allowed."""
    timeout: Duration | None = None
    """The longest this build may run (a Harbor task's build_timeout_sec); the daemon's SERVICE_BUILD_TIMEOUT
    caps it. Not part of the image's digest."""
    image_workspace: bool = Field(default=False, description=(
        "copy what the image holds under /workspace into the sandbox's workspace at boot (the workspace is mounted "
        "over /workspace and hides it otherwise); a Harbor task whose WORKDIR is under /workspace sets it"))
    image_entrypoint: bool = Field(default=False, description=(
        "start the agent container with the image's own ENTRYPOINT, given svc's keep-alive as its arguments (as "
        "Harbor starts it, with `sleep infinity`): what it sets up or starts runs, and stays for the checks; "
        "without it svc's keep-alive replaces the ENTRYPOINT"))

    @model_validator(mode="after")
    def _check_args(self) -> Build:
        for name in self.args:
            if not ARG_NAME.fullmatch(name):
                raise ValueError(f"build arg '{name}' is not a valid argument name")
            if SECRET_LIKE.search(name) and name not in self.args_not_secret:
                raise ValueError(
                    f"build arg '{name}' looks like a secret: build args are kept in the image's history, readable "
                    "by anyone who can run the image, so they are never secrets. Give secrets to the agent under "
                    f"secrets: instead, or list '{name}' under build.args_not_secret if it is not one")
        unknown = [n for n in self.args_not_secret if n not in self.args]
        if unknown:
            raise ValueError(f"args_not_secret names '{unknown[0]}', which is not among args")
        return self

    def context_dir(self) -> str:
        return context_key(self.context)

    def dockerfile_key(self) -> str:
        """The Dockerfile's path relative to the context."""
        return context_key(self.dockerfile, "dockerfile")


class BaseBuild(SpecModel):
    """`base: {build: {...}}`: the sandbox's image, built by the daemon from a Dockerfile."""

    build: Build


def _base_kind(value: Any) -> str | None:
    if isinstance(value, (str, BaseBuild)):
        return "image" if isinstance(value, str) else "build-image"
    if isinstance(value, dict):
        return "build-image"
    return None


Base = Annotated[
    Annotated[ImageRef, Tag("image")] | Annotated[BaseBuild, Tag("build-image")],
    Discriminator(
        _base_kind,
        custom_error_type="base_shape",
        custom_error_message="base is an image reference (localhost/svc/python:3.11) or {build: {context, dockerfile, args}}",
    ),
]


def context_uploads(doc: Any, uploaded: Any) -> set[str]:
    """The uploaded paths (relative to the spec file) that make the build context of `doc`'s
    base; raises ValueError when its Dockerfile is not among them."""
    base = getattr(doc, "base", None)
    if not isinstance(base, BaseBuild):
        return set()
    root = base.build.context_dir()
    used = {p for p in uploaded if root == "." or p == root or p.startswith(root + "/")}
    key = base.build.dockerfile_key()
    dockerfile = key if root == "." else f"{root}/{key}"
    if dockerfile not in used:
        raise ValueError(f"the Dockerfile '{dockerfile}' was not uploaded with the spec: the build context "
                         f"'{base.build.context}' is read by the svc CLI next to the spec file and sent with it")
    return used
