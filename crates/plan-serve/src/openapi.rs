//! `GET /openapi.json`: the API described in OpenAPI 3, generated from the handlers'
//! annotations and the types of their bodies (utoipa), never written by hand.

use utoipa::OpenApi;

use crate::schema::{
    BranchPreview, Cancelled, ErrorBody, ErrorDetail, EvalList, EvalShown, FeedbackGiven, RunList,
    RunShown, RunSummary,
};

#[derive(OpenApi)]
#[openapi(
    info(title = "planvm serve", description = "Runs of LLM-written plans over a run store."),
    paths(
        crate::api::submit,
        crate::api::list,
        crate::api::show,
        crate::api::cancel,
        crate::api::input,
        crate::api::branch,
        crate::api::preview,
        crate::events::events,
        crate::evals::feedback,
        crate::goals::session,
        crate::evals::list,
        crate::evals::show,
        crate::chat::completions,
        crate::chat::models,
        crate::chat::model_by_id,
        openapi_json,
    ),
    components(schemas(
        RunSummary,
        RunList,
        RunShown,
        crate::schema::SessionShown,
        BranchPreview,
        Cancelled,
        EvalList,
        EvalShown,
        FeedbackGiven,
        ErrorBody,
        ErrorDetail,
        crate::api::Submit,
        crate::api::Input,
        crate::api::Branch,
        crate::evals::Feedback,
        crate::evals::Verdict
    )),
    modifiers(&Bearer),
    security(("bearer" = []))
)]
pub(crate) struct ApiDoc;

/// The bearer token, as a security scheme.
struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The OpenAPI document of this API.
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "OpenAPI 3", body = Object)))]
pub(crate) async fn openapi_json() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(ApiDoc::openapi())
}
