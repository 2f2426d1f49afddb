"""What consumers hold and ask for: allocations, allocation candidates (and
our explain and capacity), total usages, the reshaper."""

from __future__ import annotations

from placement_svc import microversion as mv
from placement_svc.policies import allocation_candidates as candidate_rules
from placement_svc.policies import allocations as allocation_rules
from placement_svc.policies import reshaper as reshaper_rules
from placement_svc.policies import usages as usage_rules
from placement_svc.routes.records import (
    BAD_QUERY,
    INVALID_BODY,
    JSON_OR_TEXT_406,
    WRITE_CONFLICT,
    Operation,
    Route,
)
from placement_svc.schemas import allocation, allocation_candidate, reshaper, usage

ROUTES: tuple[Route, ...] = (
    Route(
        "/allocations/{consumer_uuid}",
        "allocations",
        (
            Operation(
                "GET",
                "show",
                allocation_rules.ALLOC_LIST,
                {200: "consumer_allocations"},
                etag=True,
                notes='Never a 404: a consumer without allocations has {"allocations": {}}.',
            ),
            Operation(
                "PUT",
                "replace",
                allocation_rules.ALLOC_UPDATE,
                {204: None},
                {
                    400: INVALID_BODY + " Or the consumer uuid is not a uuid, or a provider or "
                    "resource class does not exist.",
                    409: "The consumer generation is not the consumer's, " + WRITE_CONFLICT,
                },
                body=lambda v: allocation.for_version(v).put,
            ),
            Operation(
                "PATCH",
                "change",
                allocation_rules.ALLOC_UPDATE,
                {200: "consumer_allocations"},
                {
                    400: INVALID_BODY + " Or the consumer uuid is not a uuid, or a provider or "
                    "resource class does not exist, or more is removed than is allocated, or a "
                    "new consumer has no project_id and user_id.",
                    409: "The consumer generation given is not the consumer's, " + WRITE_CONFLICT,
                },
                allowed_since=mv.ALLOCATION_DELTAS,
                body=lambda _v: allocation.PATCH_V1_50,
                notes="Amounts added to and taken from the consumer's allocations as they "
                "are, atomically; without consumer_generation no read is needed first "
                "(placement-svc's own, 1.50).",
            ),
            Operation(
                "DELETE",
                "delete",
                allocation_rules.ALLOC_DELETE,
                {204: None},
                {404: "The consumer has no allocations.", 409: "The data changed meanwhile."},
            ),
        ),
    ),
    Route(
        "/allocations",
        "allocations",
        (
            Operation(
                "POST",
                "post_many",
                allocation_rules.ALLOC_MANAGE,
                {204: None},
                {
                    400: INVALID_BODY + " Or a provider or resource class does not exist.",
                    409: "A consumer generation is not the consumer's, " + WRITE_CONFLICT,
                },
                since=mv.POST_ALLOCATIONS,
                body=lambda v: allocation.for_version(v).post,
            ),
            # Before 1.46, the 405 allowing POST that upstream answers.
            Operation(
                "GET",
                "list_many",
                allocation_rules.ALLOC_LIST,
                {200: "allocations"},
                {
                    400: "Not exactly one of consumer_uuid, resource_provider_uuid and "
                    "in_tree, or not uuids, or more than 1000 of them.",
                },
                allowed_since=mv.BULK_ALLOCATIONS,
                query=lambda v: (
                    allocation.LIST_QUERY_V1_51 if v >= mv.HOLDS else allocation.LIST_QUERY_V1_46
                ),
                words=allocation.LIST_QUERY_WORDS,
                etag=True,
                notes="Several consumers' allocations in one read (placement-svc's own, 1.46).",
            ),
        ),
    ),
    Route(
        "/allocations/{consumer_uuid}/confirm",
        "allocations",
        (
            Operation(
                "POST",
                "confirm",
                allocation_rules.ALLOC_UPDATE,
                {204: None},
                {
                    400: INVALID_BODY + " Or the consumer uuid is not a uuid.",
                    404: "The consumer has no allocations.",
                    409: "The hold expired, its allocations gone (placement.hold.expired); or "
                    "the consumer generation given is not the consumer's.",
                },
                body=lambda _v: allocation.CONFIRM_V1_51,
                notes="A held consumer's allocations made permanent (placement-svc's own, "
                '1.51); the body is empty or {"consumer_generation": G}.',
            ),
        ),
        since=mv.HOLDS,
    ),
    Route(
        "/allocation_candidates",
        "allocation_candidates",
        (
            Operation(
                "GET",
                "list",
                candidate_rules.LIST,
                {200: "allocation_candidates"},
                {400: BAD_QUERY},
                since=mv.ALLOCATION_CANDIDATES,
                query=allocation_candidate.query_schema,
                words=allocation_candidate.QUERY_WORDS,
                notes="Request groups: resources, required, member_of and in_tree take a "
                "suffix of 1 to 64 characters of A-Z, a-z, 0-9, _ and - (resources1, "
                "required_NET, ...), one group per suffix.",
            ),
        ),
    ),
    Route(
        "/allocation_candidates/explain",
        "allocation_candidates",
        (
            Operation(
                "GET",
                "explain",
                candidate_rules.EXPLAIN,
                {200: "explanation"},
                {400: BAD_QUERY, 406: JSON_OR_TEXT_406},
                query=allocation_candidate.explain_schema,
                words=allocation_candidate.QUERY_WORDS,
                notes="The same query as GET /allocation_candidates, and near_misses= (at "
                "most 50). text/plain for a client that prefers it.",
            ),
        ),
        since=mv.CANDIDATES_EXPLAIN,
    ),
    Route(
        "/allocation_candidates/capacity",
        "allocation_candidates",
        (
            Operation(
                "GET",
                "capacity",
                candidate_rules.CAPACITY,
                {200: "capacity"},
                {400: BAD_QUERY, 406: JSON_OR_TEXT_406},
                query=allocation_candidate.query_schema,
                words=allocation_candidate.QUERY_WORDS,
                notes="The same query as GET /allocation_candidates. text/plain for a "
                "client that prefers it.",
            ),
        ),
        since=mv.CANDIDATES_EXPLAIN,
    ),
    Route(
        "/usages",
        "usages",
        (
            Operation(
                "GET",
                "show",
                usage_rules.TOTAL_USAGES,
                {200: "usages"},
                {400: "No project_id, or a parameter is unknown or badly formed."},
                since=mv.USAGES,
                query=usage.for_version,
                words=usage.QUERY_WORDS,
            ),
        ),
    ),
    Route(
        "/reshaper",
        "reshaper",
        (
            Operation(
                "POST",
                "reshape",
                reshaper_rules.RESHAPE,
                {204: None},
                {
                    400: INVALID_BODY + " Or a provider or resource class does not exist.",
                    409: "A generation is not the provider's or consumer's, allocations hold "
                    "inventory the body takes away, or the data changed meanwhile.",
                },
                since=mv.RESHAPER,
                body=reshaper.for_version,
            ),
        ),
    ),
)
