"""candidates.request.parse: the query string of GET /allocation_candidates
turned into request groups and request-wide options, and every rule upstream
enforces on it (400s with upstream's error codes), per microversion.

``query`` mirrors what the handler does: the version's schema sees each key's
last value, then ``parse`` sees every value of every key, in query order.
"""

from __future__ import annotations

import sys
from urllib.parse import parse_qsl

import jsonschema
import pytest
from microversion_parse import Version

from placement_svc import errors
from placement_svc.candidates import request
from placement_svc.schemas import allocation_candidate as schema

LATEST = Version(1, 39)
AGG1 = "aaaaaaaa-0000-0000-0000-000000000001"
AGG2 = "aaaaaaaa-0000-0000-0000-000000000002"
RP1 = "cc000001-0000-0000-0000-000000000000"


def v(minor: int) -> Version:
    return Version(1, minor)


def params_of(qs: str) -> dict[str, list[str]]:
    params: dict[str, list[str]] = {}
    for key, value in parse_qsl(qs, keep_blank_values=True):
        params.setdefault(key, []).append(value)
    return params


def schema_accepts(qs: str, version=LATEST) -> bool:
    last = {key: values[-1] for key, values in params_of(qs).items()}
    try:
        jsonschema.validate(last, schema.query_schema(version))
    except jsonschema.ValidationError:
        return False
    return True


def query(qs: str, version=LATEST) -> request.Request:
    assert schema_accepts(qs, version), f"the {version} schema refuses {qs}"
    return request.parse(params_of(qs), version)


def refused(qs: str, version=LATEST) -> errors.BadRequest:
    with pytest.raises(errors.BadRequest) as caught:
        query(qs, version)
    return caught.value


# Groups and their parts.


def test_the_unsuffixed_group_spreads_and_suffixed_groups_are_one_provider_each():
    parsed = query("resources_B=VCPU:1&resources=DISK_GB:10&resources_A=VCPU:2&group_policy=none")
    assert list(parsed.groups) == ["", "_B", "_A"]  # unsuffixed first, then in query order
    assert parsed.groups[""].same_provider is False
    assert parsed.groups["_A"].same_provider is True
    assert parsed.groups["_A"].resources == {"VCPU": 2}
    assert parsed.resource_classes() == {"VCPU", "DISK_GB"}


def test_resources_of_one_class_twice_keep_the_last_amount():
    assert query("resources=VCPU:1,VCPU:3").groups[""].resources == {"VCPU": 3}


def test_of_repeated_resources_the_last_counts():
    assert query("resources=VCPU:1&resources=DISK_GB:2").groups[""].resources == {"DISK_GB": 2}


def test_a_malformed_earlier_resources_value_is_refused():
    assert "Got: VCPU." in refused("resources=VCPU&resources=VCPU:1").message


def test_a_malformed_earlier_in_tree_is_refused():
    assert "Got: nope" in refused(f"resources=VCPU:1&in_tree=nope&in_tree={RP1}").message


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("", "Got: empty string"),
        ("VCPU", "Badly formed resources parameter"),
        ("VCPU:1,", "Badly formed resources parameter"),
        ("VCPU:1:1", "Badly formed resources parameter"),
        ("VCPU:x", "expected positive integer amount. Got: x"),
        ("VCPU:1.0", "expected positive integer amount"),
        ("VCPU:0", "requires amount >= 1. Got: 0"),
        ("VCPU:-1", "requires amount >= 1. Got: -1"),
    ],
)
def test_bad_resources_are_refused(value, words):
    error = refused(f"resources={value}")
    assert words in error.message
    assert error.code == errors.DEFAULT


def test_a_bad_suffixed_resources_names_its_group():
    assert "resources_NET" in refused("resources_NET=VCPU").message


def test_required_traits_and_forbidden_traits():
    group = query("resources=VCPU:1&required=HW_CPU_X86_AVX2,!CUSTOM_A").groups[""]
    assert group.required.any_of == [frozenset({"HW_CPU_X86_AVX2"})]
    assert group.required.forbidden == {"CUSTOM_A"}


def test_required_any_of_and_repeats_from_1_39():
    group = query("resources=VCPU:1&required=in:A,B&required=C,!D").groups[""]
    assert group.required.any_of == [frozenset({"A", "B"}), frozenset({"C"})]
    assert group.required.forbidden == {"D"}
    assert query("resources=VCPU:1&required=in:A,B").trait_names() == {"A", "B"}


def test_before_1_39_only_the_last_required_counts():
    group = query("resources=VCPU:1&required=A&required=B", v(38)).groups[""]
    assert group.required.any_of == [frozenset({"B"})]


def test_in_is_refused_before_1_39():
    assert (
        "only supported since microversion 1.39"
        in refused("resources=VCPU:1&required=in:A,B", v(38)).message
    )


def test_forbidden_traits_are_refused_before_1_22():
    assert (
        "HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !A"
        in refused("resources=VCPU:1&required=!A", v(21)).message
    )


@pytest.mark.parametrize("value", ["", "!", "A,,B", "in:", "in:A,", " , "])
def test_empty_traits_are_refused(value):
    assert "Got an empty trait in" in refused(f"resources=VCPU:1&required={value}").message


def test_a_forbidden_trait_in_an_any_of_list_is_refused():
    assert (
        "does not support forbidden traits" in refused("resources=VCPU:1&required=in:A,!B").message
    )


def test_trait_names_are_stripped():
    assert query("resources=VCPU:1&required= A , !B ").groups[""].required.forbidden == {"B"}


def test_several_leading_bangs_forbid_the_trait():
    assert query("resources=VCPU:1&required=!!A").groups[""].required.forbidden == {"A"}


def test_conflicting_traits_are_refused_from_1_22():
    error = refused("resources=VCPU:1&required=A,!A")
    assert "required: (A)" in error.message
    assert error.code == errors.DEFAULT
    assert (
        "required_X: (A, B)"
        in refused("resources_X=VCPU:1&required_X=in:A,B&required_X=!A,!B").message
    )


def test_an_any_of_list_partly_forbidden_is_no_conflict():
    assert query("resources=VCPU:1&required=in:A,B&required=!A").groups[""].required.forbidden == {
        "A"
    }


def test_member_of_forms():
    group = query(f"resources=VCPU:1&member_of=in:{AGG1},{AGG2}&member_of=!{AGG1}").groups[""]
    assert group.member_of.any_of == [frozenset({AGG1, AGG2})]
    assert group.member_of.forbidden == {AGG1}
    assert query(f"resources=VCPU:1&member_of=!in:{AGG1},{AGG2}").groups[
        ""
    ].member_of.forbidden == {AGG1, AGG2}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("nope", "contain valid UUID(s). Got: nope"),
        ("in:", "contain valid UUID"),
        ("!", "contain valid UUID"),
        (f"{AGG1},{AGG2}", "must be prefixed with the 'in:' or '!in:' keyword"),
        (f"in:{AGG1},!{AGG2}", "contain valid UUID"),
    ],
)
def test_bad_member_of_is_refused(value, words):
    assert words in refused(f"resources=VCPU:1&member_of={value}").message


def test_repeated_member_of_needs_1_24():
    qs = f"resources=VCPU:1&member_of={AGG1}&member_of={AGG2}"
    assert "Multiple member_of parameters are not supported" in refused(qs, v(23)).message
    assert query(qs, v(24)).groups[""].member_of.any_of == [frozenset({AGG1}), frozenset({AGG2})]


def test_forbidden_aggregates_need_1_32():
    assert (
        "Forbidden member_of parameters"
        in refused(f"resources=VCPU:1&member_of=!{AGG1}", v(31)).message
    )


def test_in_tree_is_stripped_and_checked():
    assert query(f"resources=VCPU:1&in_tree= {RP1} ").groups[""].in_tree == RP1
    assert "in_tree_A" in refused("resources_A=VCPU:1&in_tree_A=12").message


# Request-wide parameters.


def test_limit_is_the_first_value():
    assert query("resources=VCPU:1&limit=5&limit=2").limit == 5


def test_a_bad_first_limit_is_refused_though_the_schema_saw_a_good_last_one():
    error = refused("resources=VCPU:1&limit=x&limit=2")
    assert "limit" in error.message


def test_a_limit_beyond_any_list_is_capped():
    assert query("resources=VCPU:1&limit=99999999999999999999999").limit == sys.maxsize


@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5", ""])
def test_bad_limits_fail_the_schema(value):
    assert not schema_accepts(f"resources=VCPU:1&limit={value}")


def test_group_policy_is_needed_with_two_suffixed_groups():
    message = refused("resources_A=VCPU:1&resources_B=VCPU:1").message
    assert 'The "group_policy" parameter is required' in message
    assert query("resources_A=VCPU:1&resources_B=VCPU:1&group_policy=isolate").isolate


def test_a_resourceless_group_counts_towards_needing_group_policy():
    assert (
        "group_policy"
        in refused("resources_A=VCPU:1&required_B=CUSTOM_X&same_subtree=_A,_B").message
    )


def test_the_unsuffixed_group_and_one_suffixed_group_need_no_group_policy():
    assert query("resources=VCPU:1&resources_A=VCPU:1").group_policy is None


def test_root_required():
    parsed = query("resources=VCPU:1&root_required=A, !B")
    assert (parsed.root_required, parsed.root_forbidden) == ({"A"}, {"B"})
    assert parsed.trait_names() == {"A", "B"}


def test_root_required_may_not_be_repeated():
    error = refused("resources=VCPU:1&root_required=A&root_required=B")
    assert error.code == errors.ILLEGAL_DUPLICATE_QUERYPARAM


def test_root_required_does_not_take_in_and_has_no_special_code():
    error = refused("resources=VCPU:1&root_required=in:A,B")
    assert "in:A,B" in error.message
    assert error.code == errors.DEFAULT


def test_root_required_conflicts_are_a_bad_value():
    error = refused("resources=VCPU:1&root_required=A,!A")
    assert "Conflicting required and forbidden traits found in root_required: A" in error.message
    assert error.code == errors.QUERYPARAM_BAD_VALUE


def test_several_leading_bangs_in_root_required_forbid_the_trait():
    assert query("resources=VCPU:1&root_required=!!A").root_forbidden == {"A"}
    assert refused("resources=VCPU:1&root_required=A,!!A").code == errors.QUERYPARAM_BAD_VALUE


@pytest.mark.parametrize("value", ["", "!", "A,,B", "!!"])
def test_empty_root_traits_are_refused(value):
    assert "Got an empty trait in" in refused(f"resources=VCPU:1&root_required={value}").message


def test_same_subtree_sets_are_kept_apart():
    parsed = query(
        "resources_A=VCPU:1&resources_B=VCPU:1&resources_C=VCPU:1&group_policy=none"
        "&same_subtree=_A, _B&same_subtree=_B,_C"
    )
    assert parsed.same_subtrees == [{"_A", "_B"}, {"_B", "_C"}]


@pytest.mark.parametrize("value", ["", "_A,", ",_A"])
def test_an_empty_suffix_in_same_subtree_is_a_bad_value(value):
    error = refused(f"resources_A=VCPU:1&same_subtree={value}")
    assert "Empty string (unsuffixed group)" in error.message
    assert error.code == errors.QUERYPARAM_BAD_VALUE


def test_an_unknown_suffix_in_same_subtree_is_a_bad_value():
    error = refused("resources_A=VCPU:1&resources_B=VCPU:1&group_policy=none&same_subtree=_A,_C")
    assert "['_C'] not found in" in error.message
    assert error.code == errors.QUERYPARAM_BAD_VALUE


# Resourceless groups: allowed from 1.36 when in a same_subtree.


def test_a_resourceless_group_in_same_subtree_is_fine():
    parsed = query("resources_A=VCPU:1&required_B=CUSTOM_X&group_policy=none&same_subtree=_A,_B")
    assert parsed.groups["_B"].resources == {}
    assert parsed.groups["_B"].same_provider


@pytest.mark.parametrize(
    "qs",
    [
        "resources_A=VCPU:1&required_B=CUSTOM_X&group_policy=none",
        f"resources_A=VCPU:1&member_of_B={AGG1}&group_policy=none",
        f"resources_A=VCPU:1&in_tree_B={RP1}&group_policy=none",
    ],
)
def test_a_resourceless_group_outside_same_subtree_is_a_bad_value(qs):
    error = refused(qs)
    assert "bad group(s) - ['_B']" in error.message
    assert error.code == errors.QUERYPARAM_BAD_VALUE


@pytest.mark.parametrize(
    "qs", ["required=CUSTOM_X&resources_A=VCPU:1", f"in_tree={RP1}&resources_A=VCPU:1"]
)
def test_an_unsuffixed_resourceless_group_is_a_bad_value(qs):
    error = refused(qs)
    assert "bad group(s) - ['']" in error.message
    assert error.code == errors.QUERYPARAM_BAD_VALUE


@pytest.mark.parametrize("qs", ["group_policy=none", "required_A=CUSTOM_X&same_subtree=_A", ""])
def test_no_resources_anywhere_is_a_missing_value(qs):
    error = refused(qs)
    assert "There must be at least one resources or resources[$S] parameter." in error.message
    assert error.code == errors.QUERYPARAM_MISSING_VALUE


def test_before_1_36_a_group_needs_resources():
    assert (
        "orphaned traits keys: required_B"
        in refused("resources_A=VCPU:1&required_B=CUSTOM_X&group_policy=none", v(35)).message
    )
    assert (
        "orphaned member_of keys: member_of_B"
        in refused(f"resources_A=VCPU:1&member_of_B=!{AGG1}&group_policy=none", v(35)).message
    )
    assert (
        "All request groups must specify resources."
        in refused("resources_A=VCPU:1&required_B=!CUSTOM_X&group_policy=none", v(35)).message
    )
    assert "At least one request group" in refused("group_policy=none", v(35)).message


# What a version knows.


@pytest.mark.parametrize(
    ("qs", "first_minor"),
    [
        ("resources=VCPU:1", 10),
        ("resources=VCPU:1&limit=1", 16),
        ("resources=VCPU:1&required=A", 17),
        (f"resources=VCPU:1&member_of={AGG1}", 21),
        ("resources1=VCPU:1", 25),
        ("resources=VCPU:1&group_policy=none", 25),
        (f"resources=VCPU:1&in_tree={RP1}", 31),
        (f"resources1=VCPU:1&in_tree1={RP1}", 31),
        ("resources_A=VCPU:1", 33),
        ("resources_a-Z_9=VCPU:1", 33),
        ("resources=VCPU:1&root_required=A", 35),
        ("resources_A=VCPU:1&same_subtree=_A", 36),
    ],
)
def test_each_parameter_from_its_microversion(qs, first_minor):
    assert schema_accepts(qs, v(first_minor))
    if first_minor > 10:
        assert not schema_accepts(qs, v(first_minor - 1))


@pytest.mark.parametrize(
    ("qs", "version"),
    [
        ("resources0=VCPU:1", v(25)),
        ("resources01=VCPU:1", v(32)),
        ("resources_1=VCPU:1", v(32)),
        ("resources" + "x" * 65 + "=VCPU:1", LATEST),
        ("resources_A.B=VCPU:1", LATEST),
        ("Resources=VCPU:1", LATEST),
        ("root_member_of=" + AGG1, LATEST),
        ("resources=VCPU:1&foo=bar", LATEST),
    ],
)
def test_names_a_version_does_not_know_fail_the_schema(qs, version):
    assert not schema_accepts(qs, version)


def test_a_64_character_suffix_is_a_group():
    suffix = "x" * 64
    assert list(query(f"resources{suffix}=VCPU:1").groups) == [suffix]


def test_suffixes_are_case_sensitive():
    parsed = query("resources_a=VCPU:1&resources_A=VCPU:2&group_policy=none")
    assert {s: g.resources for s, g in parsed.groups.items()} == {
        "_a": {"VCPU": 1},
        "_A": {"VCPU": 2},
    }


def test_before_1_29_candidates_are_not_nested():
    assert query("resources=VCPU:1", v(28)).nested is False
    assert query("resources=VCPU:1", v(29)).nested is True


# placement-svc's own microversions (1.40-1.43): each parameter or value form
# from its version on; below it, the behaviour of 1.39 exactly.

ROOT_MEMBER_OF, OPTIONAL_POLICY, ISOLATE, APART = v(40), v(41), v(42), v(43)
TWO_GROUPS = "resources_A=VCPU:1&resources_B=VCPU:1"


@pytest.mark.parametrize(
    ("qs", "first_minor"),
    [
        (f"resources=VCPU:1&root_member_of={AGG1}", 40),
        ("resources_A=VCPU:1&isolate=_A", 42),
    ],
)
def test_each_own_parameter_from_its_microversion(qs, first_minor):
    assert schema_accepts(qs, v(first_minor))
    assert not schema_accepts(qs, v(first_minor - 1))
    assert not schema_accepts(qs, LATEST)


def test_root_member_of_takes_every_member_of_form_and_repeats_as_and():
    parsed = query(
        f"resources=VCPU:1&root_member_of=in:{AGG1},{AGG2}&root_member_of={AGG1}"
        f"&root_member_of=!{RP1}&root_member_of=!in:{AGG2}",
        ROOT_MEMBER_OF,
    )
    assert parsed.root_member_of.any_of == [frozenset({AGG1, AGG2}), frozenset({AGG1})]
    assert parsed.root_member_of.forbidden == {RP1, AGG2}
    assert not parsed.groups[""].member_of  # request-wide, not the group's


def test_without_root_member_of_no_root_aggregate_rule():
    assert not query("resources=VCPU:1", ROOT_MEMBER_OF).root_member_of


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("nope", "Expected 'root_member_of' parameter to contain valid UUID(s). Got: nope"),
        ("in:", "Expected 'root_member_of' parameter to contain valid UUID"),
        ("!", "Expected 'root_member_of' parameter to contain valid UUID"),
        (f"!in:{AGG1},", "Expected 'root_member_of' parameter to contain valid UUID"),
        (
            f"{AGG1},{AGG2}",
            "Multiple values for 'root_member_of' must be prefixed with the 'in:' or '!in:'",
        ),
        (f"in:{AGG1},!{AGG2}", "Expected 'root_member_of' parameter to contain valid UUID"),
    ],
)
def test_bad_root_member_of_gets_member_ofs_words_about_itself(value, words):
    error = refused(f"resources=VCPU:1&root_member_of={value}", ROOT_MEMBER_OF)
    assert words in error.message
    assert error.code == errors.DEFAULT  # as member_of's


def test_a_bad_earlier_root_member_of_is_refused_too():
    qs = f"resources=VCPU:1&root_member_of=nope&root_member_of={AGG1}"
    assert "Got: nope" in refused(qs, ROOT_MEMBER_OF).message


def test_group_policy_is_optional_from_1_41_and_absent_is_none():
    assert 'The "group_policy" parameter is required' in refused(TWO_GROUPS, ROOT_MEMBER_OF).message
    parsed = query(TWO_GROUPS, OPTIONAL_POLICY)
    assert parsed.group_policy is None
    assert not parsed.isolate
    assert parsed.isolated == frozenset()


def test_a_resourceless_group_needs_no_group_policy_from_1_41():
    qs = "resources_A=VCPU:1&required_B=CUSTOM_X&same_subtree=_A,_B"
    assert "group_policy" in refused(qs, ROOT_MEMBER_OF).message
    assert query(qs, OPTIONAL_POLICY).group_policy is None


def test_group_policy_given_keeps_its_meaning_from_1_41():
    parsed = query(TWO_GROUPS + "&group_policy=isolate", OPTIONAL_POLICY)
    assert parsed.isolate
    assert parsed.isolated == {"_A", "_B"}
    assert query(TWO_GROUPS + "&group_policy=none", OPTIONAL_POLICY).isolated == frozenset()


def test_isolate_names_the_suffixes_as_written_in_the_query():
    parsed = query(TWO_GROUPS + "&resources_C=VCPU:1&isolate=_A, _C", ISOLATE)
    assert parsed.isolated == {"_A", "_C"}
    assert parsed.group_policy is None
    assert query("resources1=VCPU:1&resources2=VCPU:1&isolate=1,2", ISOLATE).isolated == {
        "1",
        "2",
    }


def test_repeated_isolate_is_the_union_of_its_lists():
    qs = TWO_GROUPS + "&resources_C=VCPU:1&isolate=_A&isolate=_B,_A"
    assert query(qs, ISOLATE).isolated == {"_A", "_B"}


def test_isolate_may_name_a_resourceless_group():
    qs = TWO_GROUPS + "&required_R=CUSTOM_X&same_subtree=_A,_R&isolate=_R,_B"
    assert query(qs, ISOLATE).isolated == {"_R", "_B"}


def test_isolate_with_group_policy_is_a_bad_value():
    for policy in ("none", "isolate"):
        error = refused(f"{TWO_GROUPS}&isolate=_A&group_policy={policy}", ISOLATE)
        assert '"isolate" and "group_policy" parameters can not be used together' in error.message
        assert error.code == errors.QUERYPARAM_BAD_VALUE


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("_C", "Real suffixes should be specified in `isolate`: ['_C'] not found in"),
        ("_A,A", "`isolate`: ['A'] not found in"),
        ("_A,!_B", "`isolate`: ['!_B'] not found in"),
        ("", "Empty string (unsuffixed group) can not be specified in `isolate`"),
        ("_A,", "Empty string (unsuffixed group) can not be specified in `isolate`"),
    ],
)
def test_isolate_must_name_granular_groups(value, words):
    error = refused(f"resources=VCPU:1&{TWO_GROUPS}&isolate={value}", ISOLATE)
    assert words in error.message
    assert error.code == errors.QUERYPARAM_BAD_VALUE


def test_a_same_subtree_value_with_negations_is_also_apart():
    parsed = query(
        TWO_GROUPS + "&resources_C=VCPU:1&resources_D=VCPU:1"
        "&same_subtree=_A,!_C, !_D&same_subtree=_A,_B",
        APART,
    )
    assert parsed.same_subtrees == [{"_A"}, {"_A", "_B"}]
    assert parsed.apart == [(frozenset({"_A"}), frozenset({"_C", "_D"}))]


def test_several_positive_suffixes_keep_their_subtree_and_the_negated_out_of_it():
    parsed = query(TWO_GROUPS + "&resources_C=VCPU:1&same_subtree=_A,_B,!_C", APART)
    assert parsed.same_subtrees == [{"_A", "_B"}]
    assert parsed.apart == [(frozenset({"_A", "_B"}), frozenset({"_C"}))]


def test_a_negated_group_may_be_resourceless():
    parsed = query("resources_A=VCPU:1&required_R=CUSTOM_X&same_subtree=_A,!_R", APART)
    assert parsed.groups["_R"].resources == {}
    assert parsed.apart == [(frozenset({"_A"}), frozenset({"_R"}))]


def test_a_resourceless_group_named_only_in_isolate_still_needs_same_subtree():
    error = refused("resources_A=VCPU:1&required_R=CUSTOM_X&isolate=_R", APART)
    assert "bad group(s) - ['_R']" in error.message


def test_without_negations_same_subtree_is_unchanged_at_1_43():
    parsed = query(TWO_GROUPS + "&same_subtree=_A,_B", APART)
    assert (parsed.same_subtrees, parsed.apart) == ([{"_A", "_B"}], [])


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("!_A", "needs at least one suffix that is not negated"),
        ("!_A,!_B", "needs at least one suffix that is not negated"),
        ("_A,!_A", "Suffixes both in and negated in one `same_subtree` value: ['_A']"),
        ("_A,_B,!_B", "both in and negated in one `same_subtree` value: ['_B']"),
        ("_A,!_C", "Real suffixes should be specified in `same_subtree`: ['!_C'] not found in"),
        ("_A,!!_B", "['!!_B'] not found in"),
        ("_A,!", "Empty string (unsuffixed group) can not be specified in `same_subtree`"),
        ("!,_A", "Empty string (unsuffixed group)"),
    ],
)
def test_bad_negations_in_same_subtree_are_bad_values(value, words):
    error = refused(f"resources=VCPU:1&{TWO_GROUPS}&same_subtree={value}", APART)
    assert words in error.message
    assert error.code == errors.QUERYPARAM_BAD_VALUE


@pytest.mark.parametrize("version", [LATEST, ISOLATE])
def test_before_1_43_a_bang_in_same_subtree_names_no_group_as_at_1_39(version):
    error = refused(f"{TWO_GROUPS}&group_policy=none&same_subtree=_A,!_B", version)
    assert "Real suffixes should be specified in `same_subtree`: ['!_B'] not found in" in (
        error.message
    )
    assert error.code == errors.QUERYPARAM_BAD_VALUE
    assert (
        "['!_A'] not found"
        in refused(f"{TWO_GROUPS}&group_policy=none&same_subtree=!_A", version).message
    )


def test_groups_ask_alike_whatever_their_suffix_and_the_order_of_their_lists():
    req = query(
        "resources1=VGPU:1,VCPU:2&required1=in:CUSTOM_B,CUSTOM_A"
        f"&member_of1=in:{AGG2},{AGG1}&resources_X=VCPU:2,VGPU:1"
        f"&required_X=in:CUSTOM_A,CUSTOM_B&member_of_X=in:{AGG1},{AGG2}"
        "&resources2=VGPU:1,VCPU:2&resources=VGPU:1,VCPU:2&group_policy=none"
    )
    one, x, two, unsuffixed = (req.groups[s] for s in ("1", "_X", "2", ""))
    assert one.asks() == x.asks()
    assert two.asks() != one.asks()  # no required, no member_of
    assert unsuffixed.asks() != two.asks()  # the unsuffixed group may spread
