"""The users of the differential harness's custom-auth half (`auth_driver.py`): two bearer
tokens, and LangGraph's owner-only rules, as agentstate-server's `OwnerOnly` has them: what a
user creates is stamped `owner` (a patch too), everything else is filtered by it; the graphs'
assistants (`created_by: system`) are everyone's.
"""

from langgraph_sdk import Auth

auth = Auth()
USERS = {
    "token-alice": {"identity": "alice", "permissions": ["write"]},
    "token-bob": {"identity": "bob", "permissions": []},
}


@auth.authenticate
async def authenticate(authorization: str | None):
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token.strip() not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    return USERS[token.strip()]


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict):
    if ctx.resource == "assistants" and ctx.action in ("read", "search"):
        return {"$or": [{"owner": ctx.user.identity}, {"created_by": "system"}]}
    if ctx.action in ("create", "create_run", "update", "put") and isinstance(value, dict):
        metadata = value.setdefault("metadata", {})
        if isinstance(metadata, dict):
            metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}
