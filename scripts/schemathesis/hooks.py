"""schemathesis hooks of the contract run (scripts/schemathesis.sh): the run's own account
is left alone, a DELETE that resets rather than removes is not taken for a removal, a
resource made on request is not expected with what holds it, and another service that
cannot be reached is not taken for the server's failure.

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


# These exist once asked for, not with what holds them: a library's forecast is made by
# POST /libraries/{id}/forecast, and until then GET answers 404 (not_found, "a forecast of
# library N"). schemathesis's ensure_resource_availability check (ST302) expects every GET
# under a just-created resource to find it.
MADE_ON_REQUEST = {"/libraries/{id}/forecast"}


# "Get a new copy" asks the Sonarr or Radarr that holds the file; the run's connections
# point at nothing that answers, so it is the documented 503 (unavailable: the app could not
# be asked, the file left as it was). schemathesis's not_a_server_error check (ST101) takes
# any 5xx for the server's own failure.
ASKS_ANOTHER_SERVICE = {"/libraries/{id}/health/files/{fileId}/regrab"}


def another_service_unavailable(failure, case, response):
    if failure.code != "ST101" or case.operation.path not in ASKS_ANOTHER_SERVICE or response.status_code != 503:
        return False
    try:
        return response.json()["error"]["code"] == "unavailable"
    except (ValueError, KeyError, TypeError):
        return False


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if another_service_unavailable(failure, case, response):
        return False
    if redirected(case):
        return False
    if failure.code == "ST301" and case.operation.path in RESET_ON_DELETE:
        return False
    return not (failure.code == "ST302" and case.operation.path in MADE_ON_REQUEST)
