"""schemathesis hooks of the contract run (scripts/schemathesis.sh): the run's own account
is left alone, and a DELETE that resets rather than removes is not taken for a removal.

The run acts as one administrator with a random name (CONDENSE_CONTRACT_USER). Deleting it,
changing its role or setting its password revokes the token every request of the run
carries, and the rest of the run would test nothing but 401. schemathesis learns the name
from GET /users and GET /auth/me and fills it into /users/{username}; such a request goes to
a user that does not exist instead (a 404, which the document states).
"""

import os

import schemathesis

OWN = os.environ["CONDENSE_CONTRACT_USER"]
ELSEWHERE = OWN + "-elsewhere"


@schemathesis.hook
def before_call(context, case, kwargs):
    if (case.path_parameters or {}).get("username") == OWN:
        case.path_parameters["username"] = ELSEWHERE


def redirected(case):
    """Whether `before_call` sent this request elsewhere: what it meets there (a 404 where the
    stateful phase expected the user it was following) is this hook's doing, not the API's."""
    return (case.path_parameters or {}).get("username") == ELSEWHERE


# DELETE on these does not remove what GET then reads: a node's schedule deleted makes the
# node follow the default one (still served), a cancelled forecast keeps its last report,
# the licence removed leaves the free tier. schemathesis's use_after_free check (ST301)
# expects a 404 after any DELETE; per-operation settings do not reach its stateful phase.
RESET_ON_DELETE = {"/nodes/{id}/schedule", "/libraries/{id}/forecast", "/license"}


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if redirected(case):
        return False
    return not (failure.code == "ST301" and case.operation.path in RESET_ON_DELETE)
