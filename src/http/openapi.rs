//! GET /openapi.json: the API described in OpenAPI 3.1, generated from the handlers'
//! `#[utoipa::path]` annotations and the request and response types themselves, so the
//! document cannot drift from the code. Who may call each operation (bearer token or
//! nobody) comes from the route table, `http::endpoints()`, the same one that installs the
//! token check, handed to `build`. `condense openapi` prints it; the dashboard's types are generated from it.

use actix_web::http::Method;
use actix_web::HttpResponse;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::schema::{AnyOfBuilder, Schema, SchemaType, Type};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi, ToSchema};

use super::auth::AuthUser;
use super::endpoint::{Access, Endpoint};
use serde_json::{json, Value};

use crate::domain::access::KeyScope;
use crate::error::ErrorBody;

/// The name of the bearer-token security scheme (a login token, or an API key).
const BEARER: &str = "bearerAuth";
/// The name of the `X-Api-Key` security scheme.
const API_KEY: &str = "apiKeyAuth";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "condense API",
        description = "Self-hosted media re-encoding service. Every path is served both unprefixed and under /api \
            (see servers). Every endpoint but GET /healthz and POST /auth/login needs \
            `Authorization: Bearer <token>` (a token from POST /auth/login). Request bodies are JSON; unknown \
            fields are refused. Errors are `{\"error\":{\"code\",\"message\"}}`.",
    ),
    servers(
        (url = "/", description = "Unprefixed"),
        (url = "/api", description = "The same API under /api (also on the web interface port)"),
    ),
    paths(
        super::health::healthz,
        super::auth::login,
        super::auth::refresh,
        super::auth::logout,
        super::auth::me,
        super::auth::change_password,
        document,
        super::libraries::list,
        super::libraries::create,
        super::libraries::get,
        super::libraries::update,
        super::libraries::delete,
        super::forecast::start,
        super::forecast::get,
        super::forecast::cancel,
        super::library_health::start,
        super::library_health::get,
        super::library_health::cancel,
        super::library_health::recheck,
        super::library_health::ignore,
        super::library_health::regrab,
        super::settings::get,
        super::settings::update,
        super::license::get,
        super::license::install,
        super::license::remove,
        super::license::start_trial,
        super::audit::list,
        super::api_keys::list,
        super::api_keys::create,
        super::api_keys::delete,
        super::notifications::list,
        super::notifications::create,
        super::notifications::get,
        super::notifications::update,
        super::notifications::delete,
        super::notifications::test,
        super::connections::list,
        super::connections::create,
        super::connections::get,
        super::connections::update,
        super::connections::delete,
        super::connections::test,
        super::users::list,
        super::users::create,
        super::users::set_password,
        super::users::set_role,
        super::users::delete,
        super::nodes::list,
        super::nodes::revoke,
        super::nodes::remove,
        super::schedule::get_node,
        super::schedule::set_node,
        super::schedule::clear_node,
        super::schedule::get_default,
        super::schedule::set_default,
        super::encoders::list,
        super::jobs::list,
        super::jobs::get,
        super::job_plan::get,
        super::actions::pause,
        super::actions::resume,
        super::actions::retry,
        super::actions::cancel,
        super::actions::force,
        super::actions::priority,
        super::integrations::arr,
        super::integrations::get_arr_settings,
        super::integrations::set_arr_settings,
        super::actions::pause_all,
        super::actions::resume_all,
        super::actions::scan,
        super::ws::connect,
        super::stats::queue,
        super::stats::dashboard,
        super::stats::health,
        super::health::last_recheck,
        super::health::recheck,
        super::insights::overview,
        super::insights::statistics,
        super::insights::savings,
        super::insights::nodes,
        super::insights::codecs,
        super::insights::failures,
        super::metrics::metrics,
    ),
    // Sent on the WebSocket rather than answered by an operation, so listed by hand.
    components(schemas(crate::actors::bus::JobUpdate, crate::actors::bus::Resync)),
    tags(
        (name = "system"),
        (name = "auth"),
        (name = "libraries"),
        (name = "settings"),
        (name = "license"),
        (name = "users"),
        (name = "nodes"),
        (name = "jobs"),
        (name = "statistics"),
        (name = "insights"),
        (name = "queue", description = "Queue-wide actions"),
        (name = "integrations", description = "Sonarr and Radarr"),
        (name = "notifications", description = "Webhooks, Discord, ntfy, Gotify, Apprise and e-mail"),
        (name = "connections", description = "Plex, Jellyfin, Emby, Sonarr and Radarr, told of replaced files"),
    )
)]
struct ApiDoc;

/// Marks each operation as the route table protects it: a bearer token and a 401 answer
/// for token endpoints, no security for public ones.
struct AccessFromRouteTable<'a>(&'a [Endpoint]);

impl Modify for AccessFromRouteTable<'_> {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build()),
        );
        components.add_security_scheme(API_KEY, SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-Api-Key"))));
        for (name, description) in SHARED_ANSWERS {
            components.responses.insert((*name).into(), RefOr::T(error_answer(description)));
        }
        for schema in components.schemas.values_mut() {
            any_of_where_variants_overlap(schema);
        }
        for endpoint in self.0 {
            let Some(operation) =
                doc.paths.paths.get_mut(endpoint.path).and_then(|item| operation(item, &endpoint.method))
            else {
                // Undocumented: the test over `endpoints()` names it.
                continue;
            };
            match endpoint.access {
                Access::Public => operation.security = Some(Vec::new()),
                Access::Token => {
                    // Either one: a login token or API key as the bearer, or a key in X-Api-Key.
                    operation.security = Some(vec![
                        SecurityRequirement::new(BEARER, Vec::<String>::new()),
                        SecurityRequirement::new(API_KEY, Vec::<String>::new()),
                    ]);
                    answer(operation, "401", "Unauthorized");
                    answer(operation, "403", "Forbidden");
                }
            }
            answer_by_shape(operation);
        }
    }
}

/// Rules between the fields of a body, which the derive cannot state: `(where the body's
/// schema is, the rule it must also meet)`. Its handler checks each too.
fn body_rules() -> Vec<(&'static str, Value)> {
    let scopes: Vec<&str> =
        KeyScope::ALL.iter().map(|s| s.as_str()).filter(|s| *s != KeyScope::Read.as_str()).collect();
    vec![
        // A key says what it is for: a scope, or (older clients) readOnly true for `read`;
        // both only where they agree. Keys in their sorted order: serde_json keeps the
        // order written where a crate of the build enables `preserve_order` and sorts
        // where none does, and the dashboard's types are generated from this text.
        (
            "/components/schemas/CreateApiKey",
            json!({ "anyOf": [
            { "required": ["scope"], "properties": { "readOnly": { "type": "null" }, "scope": { "$ref": "#/components/schemas/KeyScope" } } },
            { "required": ["readOnly"], "properties": { "readOnly": { "const": true }, "scope": { "enum": [KeyScope::Read.as_str(), null] } } },
            { "required": ["readOnly", "scope"], "properties": { "readOnly": { "const": false }, "scope": { "enum": scopes } } },
        ] }),
        ),
        // A new connection needs the product's key; an update keeps the stored one.
        (
            "/paths/~1connections/post/requestBody/content/application~1json/schema",
            json!({ "properties": { "apiKey": super::schema::not_blank() }, "required": ["apiKey"] }),
        ),
    ]
}

/// What a POST on a resource makes possible next, on the same resource: `(its path, the
/// answer that makes it possible, the operation it makes possible)`. A client reading the
/// document, and the contract run's stateful phase, follow these links; without them a
/// paused job, a running health check or forecast is found only by chance.
const FOLLOW_UPS: &[(&str, &str, &str)] = &[
    ("/jobs/{id}/pause", "200", "resume"),
    ("/libraries/{id}/health", "202", "cancel_library_health"),
    ("/libraries/{id}/forecast", "202", "cancel_forecast"),
];

/// The body rules and the follow-up links, written into the document as JSON: utoipa 5.5's
/// model has no place for a rule beside an object's properties, and writes a link's
/// `operationId` as `operation_id`.
fn rules_and_links(doc: &mut Value) {
    for (at, rule) in body_rules() {
        if let Some(schema) = doc.pointer_mut(at) {
            *schema = json!({ "allOf": [schema.take(), rule] });
        }
    }
    for (path, answer, then) in FOLLOW_UPS {
        let at = format!("/paths/{}/post/responses/{answer}", path.replace('~', "~0").replace('/', "~1"));
        // Absent: the test over the document names it.
        if let Some(Value::Object(response)) = doc.pointer_mut(&at) {
            let link = json!({ "operationId": then, "parameters": { "id": "$request.path.id" } });
            response.entry("links").or_insert_with(|| json!({}))[*then] = link;
        }
    }
}

/// The answers every operation of a kind shares, documented once as response components
/// and referred to by each operation they apply to (`answer_by_shape`): the extractors and
/// the token middleware give them, whatever the handler.
const SHARED_ANSWERS: &[(&str, &str)] = &[
    ("MalformedBody", "Malformed JSON, a body over 1 MiB, or a Content-Type other than application/json (code malformed_json, payload_too_large, unsupported_content_type)"),
    ("InvalidQuery", "A query parameter of the wrong type or out of its bounds (code invalid_query)"),
    ("Unauthorized", "Missing, malformed, expired or wrongly signed token (code unauthorized)"),
    ("Forbidden", "The caller's role, or the API key's scope, does not reach this operation (code forbidden)"),
    ("NotFound", "No such resource, or an identifier that is not one (code not_found)"),
    ("InvalidBody", "Wrong types, a missing or unknown field (code invalid_body), or a value the server refuses (code validation_failed; the message names the field)"),
];

/// An untagged enum of a float and an integer (`domain::health::CheckValue`) is a `oneOf`
/// to the derive, but every integer is a number too: a value would match two variants,
/// which `oneOf` forbids. Such a choice is an `anyOf`.
fn any_of_where_variants_overlap(schema: &mut RefOr<Schema>) {
    let RefOr::T(Schema::OneOf(one_of)) = schema else { return };
    let has = |wanted: Type| {
        one_of.items.iter().any(|item| {
            matches!(item, RefOr::T(Schema::Object(object)) if object.schema_type == SchemaType::Type(wanted.clone()))
        })
    };
    if !(has(Type::Number) && has(Type::Integer)) {
        return;
    }
    let mut any_of = AnyOfBuilder::new().description(one_of.description.clone()).build();
    any_of.items = std::mem::take(&mut one_of.items);
    *schema = RefOr::T(Schema::AnyOf(any_of));
}

fn error_answer(description: &str) -> utoipa::openapi::Response {
    let error = RefOr::Ref(Ref::from_schema_name(ErrorBody::name()));
    ResponseBuilder::new()
        .description(description)
        .content("application/json", ContentBuilder::new().schema(Some(error)).build())
        .build()
}

/// Documents `status` with the shared answer `name`, unless the operation states its own.
fn answer(operation: &mut Operation, status: &str, name: &str) {
    operation.responses.responses.entry(status.into()).or_insert_with(|| RefOr::Ref(Ref::from_response_name(name)));
}

/// The shared answers an operation gives by its shape: a JSON body can be malformed or
/// refused, a query parameter can be out of bounds, a path identifier can name nothing.
fn answer_by_shape(operation: &mut Operation) {
    if operation.request_body.is_some() {
        answer(operation, "400", "MalformedBody");
        answer(operation, "422", "InvalidBody");
    }
    let parameters = operation.parameters.as_deref().unwrap_or_default();
    let in_path = parameters.iter().any(|p| p.parameter_in == ParameterIn::Path);
    let in_query = parameters.iter().any(|p| p.parameter_in == ParameterIn::Query && p.name != "token");
    if in_query {
        answer(operation, "400", "InvalidQuery");
    }
    if in_path {
        answer(operation, "404", "NotFound");
    }
}

fn operation<'a>(item: &'a mut utoipa::openapi::PathItem, method: &Method) -> Option<&'a mut Operation> {
    match *method {
        Method::GET => item.get.as_mut(),
        Method::POST => item.post.as_mut(),
        Method::PUT => item.put.as_mut(),
        Method::DELETE => item.delete.as_mut(),
        Method::PATCH => item.patch.as_mut(),
        _ => None,
    }
}

/// The document of the handlers' annotations, with who may call each operation taken from
/// `endpoints` (the route table).
pub fn build(endpoints: &[Endpoint]) -> Value {
    let mut doc = ApiDoc::openapi();
    AccessFromRouteTable(endpoints).modify(&mut doc);
    // utoipa's model serializes to JSON whatever it holds; Null would fail the tests.
    let mut doc = serde_json::to_value(doc).unwrap_or(Value::Null);
    rules_and_links(&mut doc);
    doc
}

/// The document `GET /openapi.json` serves (app data, registered by `http::routes`), built
/// at its first request.
pub struct ApiDocument(pub &'static std::sync::LazyLock<Value>);

/// This document
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "system",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json")),
)]
pub async fn document(_user: AuthUser, doc: actix_web::web::Data<ApiDocument>) -> HttpResponse {
    HttpResponse::Ok().json(&**doc.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{api, endpoints};

    fn doc() -> serde_json::Value {
        serde_json::to_value(api()).unwrap()
    }

    #[test]
    fn the_document_is_json_and_lists_exactly_the_registered_endpoints() {
        let doc = doc();
        assert_eq!(doc["openapi"].as_str().unwrap().get(..2), Some("3."));
        let paths = doc["paths"].as_object().unwrap();
        let mut documented = Vec::new();
        for (path, item) in paths {
            for method in item.as_object().unwrap().keys().filter(|k| *k != "parameters") {
                documented.push(format!("{} {path}", method.to_uppercase()));
            }
        }
        let mut registered: Vec<String> = endpoints().iter().map(|e| format!("{} {}", e.method, e.path)).collect();
        documented.sort();
        registered.sort();
        assert_eq!(documented, registered);
        for endpoint in endpoints() {
            let operation = &doc["paths"][endpoint.path][endpoint.method.as_str().to_lowercase()];
            let open = operation["security"].as_array().is_some_and(std::vec::Vec::is_empty);
            assert_eq!(open, endpoint.access == Access::Public, "{} {}", endpoint.method, endpoint.path);
            assert!(operation["responses"].is_object(), "{} {}", endpoint.method, endpoint.path);
        }
    }

    #[test]
    fn every_schema_reference_resolves() {
        fn walk(value: &serde_json::Value, doc: &serde_json::Value) {
            match value {
                serde_json::Value::Object(map) => {
                    if let Some(reference) = map.get("$ref").and_then(|r| r.as_str()) {
                        let pointer = reference.strip_prefix('#').unwrap();
                        assert!(doc.pointer(pointer).is_some(), "dangling {reference}");
                    }
                    map.values().for_each(|v| walk(v, doc));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, doc)),
                _ => {}
            }
        }
        let doc = doc();
        walk(&doc, &doc);
    }

    #[test]
    fn each_follow_up_links_a_post_to_an_operation_on_the_same_id() {
        let doc = doc();
        let paths = doc["paths"].as_object().unwrap();
        let operations = || {
            paths.iter().flat_map(|(path, item)| item.as_object().unwrap().values().map(move |op| (path.as_str(), op)))
        };
        let path_of = |id: &str| operations().find(|(_, op)| op["operationId"] == id).map(|(path, _)| path);
        let mut links = Vec::new();
        for (path, op) in operations() {
            for response in op["responses"].as_object().into_iter().flat_map(|r| r.values()) {
                for (name, link) in response["links"].as_object().into_iter().flatten() {
                    let target = link["operationId"].as_str().unwrap();
                    assert_eq!(name, target);
                    let target_path =
                        path_of(target).unwrap_or_else(|| panic!("{path} links to no operation {target}"));
                    assert!(path.contains("{id}") && target_path.contains("{id}"), "{path} -> {target_path}");
                    assert_eq!(link["parameters"], serde_json::json!({ "id": "$request.path.id" }));
                    links.push(target.to_string());
                }
            }
        }
        let expected: Vec<String> = FOLLOW_UPS.iter().map(|(_, _, then)| then.to_string()).collect();
        links.sort();
        let mut sorted = expected.clone();
        sorted.sort();
        assert_eq!(links, sorted, "every follow-up is written, once");
    }

    #[test]
    fn a_job_lists_its_allowed_actions_as_an_enum() {
        let doc = doc();
        let schemas = &doc["components"]["schemas"];
        assert_eq!(schemas["JobView"]["properties"]["actions"]["items"]["$ref"], "#/components/schemas/UserAction");
        assert_eq!(schemas["UserAction"]["enum"], serde_json::json!(["pause", "resume", "retry", "force", "cancel"]));
        assert!(schemas["JobUpdate"]["required"].as_array().unwrap().contains(&"actions".into()));
    }
}
