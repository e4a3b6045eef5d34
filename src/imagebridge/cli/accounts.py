"""Bodies of ``login`` and ``accounts list|status|remove``.

What these print about a login: its name, home, plan, expiry and a short hash of the
ChatGPT account id. Never a token, an e-mail or an account id in full.
"""

from __future__ import annotations

import shutil
import sys
import time
import webbrowser
from typing import Any

from imagebridge.application.logins import issuer_from, own_login
from imagebridge.cli.context import CliContext, CliUsageError
from imagebridge.config.model import AccountSettings
from imagebridge.contract.accounts import DEFAULT_ACCOUNT, short_hash
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import JWT_AUTH_CLAIM, jwt_claims, read_auth_document
from imagebridge.providers.codex.login.flows import browser_login, device_code_login, store_tokens
from imagebridge.providers.codex.login.issuer import DeviceCode
from imagebridge.providers.codex.login.refresh import access_token_expiry
from imagebridge.providers.codex.login.store import OwnLogin, list_logins, utc_stamp

__all__ = ["accounts_list", "accounts_remove", "accounts_status", "login", "login_summary"]


def _settings(ctx: CliContext) -> AccountSettings:
    return ctx.config().accounts


def login(ctx: CliContext, account: str | None, *, browser: bool, open_browser: bool) -> int:
    """Sign in (device code by default, ``--browser`` for PKCE) and store the tokens."""
    settings = _settings(ctx)
    target = own_login(settings, account or DEFAULT_ACCOUNT)
    issuer = issuer_from(settings)
    timeout_s = float(settings.login.device_code_timeout_secs)
    err = ctx.output.stderr

    def show_code(code: DeviceCode) -> None:
        err.write(
            "To sign in, open this page in a browser and enter the one-time code "
            f"(expires in {int(timeout_s // 60) or 1} min; never share it):\n"
            f"  {code.verification_url}\n  {code.user_code}\n"
        )
        err.flush()

    def show_url(url: str) -> None:
        err.write(f"Sign in in your browser:\n  {url}\n")
        err.flush()
        if open_browser:
            webbrowser.open(url)

    if browser:
        tokens = browser_login(
            issuer, port=settings.login.callback_port, timeout_s=timeout_s, show=show_url
        )
    else:
        tokens = device_code_login(issuer, timeout_s=timeout_s, show=show_code)
    store_tokens(target, tokens, settings.lock_timeout_ms / 1000)
    ctx.output.status(f"Signed in; login '{target.name}' stored.")
    ctx.output.value(login_summary(target, settings))
    return 0


def accounts_list(ctx: CliContext) -> int:
    settings = _settings(ctx)
    ctx.output.value(
        {
            "directory": str(settings.directory),
            "active": settings.active,
            "accounts": [login.name for login in list_logins(settings.directory)],
        }
    )
    return 0


def accounts_status(ctx: CliContext, account: str | None) -> int:
    settings = _settings(ctx)
    if account is not None:
        target = own_login(settings, account)
        if not target.exists():
            raise _not_found(target.name)
        logins = [target]
    else:
        logins = list_logins(settings.directory)
    ctx.output.value({"accounts": [login_summary(login, settings) for login in logins]})
    return 0


def accounts_remove(ctx: CliContext, account: str, *, yes: bool) -> int:
    settings = _settings(ctx)
    target = own_login(settings, account)
    if not target.exists():
        raise _not_found(target.name)
    if not yes:
        if not sys.stdin.isatty():
            raise CliUsageError("accounts remove deletes the stored login: pass --yes to confirm")
        answer = input(f"Delete the login '{target.name}' from this machine? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            ctx.output.status("Nothing removed.")
            return 1
    shutil.rmtree(target.home)
    if settings.active == target.name:
        ctx.output.notice(
            "This was accounts.active: the Codex transports have no login until you sign in "
            "again or change accounts.active."
        )
    ctx.output.value({"removed": target.name})
    return 0


def login_summary(login: OwnLogin, settings: AccountSettings) -> dict[str, Any]:
    """What ``status`` shows about one login (no secret, no personal data in full)."""
    summary: dict[str, Any] = {
        "name": login.name,
        "home": str(login.home),
        "active": settings.active == login.name,
    }
    try:
        document = read_auth_document(login.auth_file)
    except BridgeError as error:
        summary["state"] = "unreadable"
        summary["reason"] = error.details.get("reason")
        return summary
    tokens = document.get("tokens") if isinstance(document.get("tokens"), dict) else {}
    assert isinstance(tokens, dict)
    claims = jwt_claims(str(tokens.get("id_token") or "")) or {}
    auth = claims.get(JWT_AUTH_CLAIM) if isinstance(claims.get(JWT_AUTH_CLAIM), dict) else {}
    assert isinstance(auth, dict)
    plan = auth.get("chatgpt_plan_type")
    account_id = tokens.get("account_id") or auth.get("chatgpt_account_id")
    expiry = access_token_expiry(document)
    now = time.time()
    summary.update(
        {
            "state": "expired" if expiry is not None and expiry <= now else "signed_in",
            "plan": plan if isinstance(plan, str) else None,
            "account": short_hash(account_id) if isinstance(account_id, str) else None,
            "expires_at": utc_stamp(expiry) if expiry is not None else None,
            "expires_in_seconds": int(expiry - now) if expiry is not None else None,
            "last_refresh": document.get("last_refresh")
            if isinstance(document.get("last_refresh"), str)
            else None,
            "refresh_token": bool(tokens.get("refresh_token")),
        }
    )
    return summary


def _not_found(name: str) -> BridgeError:
    return BridgeError(
        ErrorCode.INVALID_REQUEST,
        f"No stored login named '{name}'.",
        details={"field": "account"},
        suggestions=("`imagegen-bridge accounts list` shows the stored logins.",),
    )
