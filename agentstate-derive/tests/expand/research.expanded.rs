#[doc(hidden)]
#[allow(dead_code, non_camel_case_types)]
struct __AgentStateRequirementsOfResearch
where
    Vec<String>: ::agentstate::__private::FieldValue,
    Vec<u32>: ::agentstate::__private::FieldValue,
    Vec<Finding>: ::agentstate::__private::FieldValue,
    String: ::agentstate::__private::FieldValue,
    ::agentstate::reducers::Append: ::agentstate::reducers::Reducer<Vec<String>>
        + ::agentstate::reducers::Merges<Vec<String>, Update = Vec<String>>,
    ::agentstate::reducers::BoundedAppend: ::agentstate::reducers::Reducer<Vec<u32>>
        + ::agentstate::reducers::Merges<Vec<u32>, Update = Vec<u32>>,
    ::agentstate::reducers::MergeByKey<()>:
        ::agentstate::reducers::Merges<Vec<Finding>, Update = Vec<Finding>>,
    AgentState: ::agentstate::State,
    ::agentstate::reducers::LastWriteWins: ::agentstate::reducers::Reducer<String>
        + ::agentstate::reducers::Merges<String, Update = String>,
    AgentState: ::agentstate::update::Extensible;
const _: () = {
    #[doc(hidden)]
    #[derive(:: core :: default :: Default)]
    pub struct __AgentStateFields<__B> {
        notes: ::core::option::Option<Vec<String>>,
        recent: ::core::option::Option<Vec<u32>>,
        findings: ::core::option::Option<Vec<Finding>>,
        base: __B,
        cache: ::core::option::Option<u8>,
        title: ::core::option::Option<String>,
        __agentstate_base: ::core::marker::PhantomData<__B>,
    }
    #[automatically_derived]
    impl<'de> ::agentstate::state::DeserializeFields<'de> for Research
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        AgentState: ::agentstate::state::DeserializeFields<'de>,
        Vec<String>: ::agentstate::__private::FieldValue,
        Vec<u32>: ::agentstate::__private::FieldValue,
        Vec<Finding>: ::agentstate::__private::FieldValue,
        String: ::agentstate::__private::FieldValue,
    {
        type Fields =
            __AgentStateFields<<AgentState as ::agentstate::state::DeserializeFields<'de>>::Fields>;
        #[inline]
        fn deserialize_field<__A: ::agentstate::__private::serde::de::MapAccess<'de>>(
            __fields: &mut Self::Fields,
            __key: &str,
            __map: &mut __A,
        ) -> ::core::result::Result<bool, __A::Error> {
            match __key {
                "notes" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.notes,
                    "notes",
                    __map,
                ),
                "recent" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.recent,
                    "recent",
                    __map,
                ),
                "findings" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.findings,
                    "findings",
                    __map,
                ),
                "cache" => {
                    ::agentstate::__private::deserialize_value(&mut __fields.cache, "cache", __map)
                }
                "title" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.title,
                    "title",
                    __map,
                ),
                _ => {
                    <AgentState as ::agentstate::state::DeserializeFields<'de>>::deserialize_field(
                        &mut __fields.base,
                        __key,
                        __map,
                    )
                }
            }
        }
        #[inline]
        fn finish<__E: ::agentstate::__private::serde::de::Error>(
            __fields: Self::Fields,
        ) -> ::core::result::Result<Self, __E> {
            let __value_notes = match __fields.notes {
                ::core::option::Option::Some(__value) => __value,
                ::core::option::Option::None => {
                    ::agentstate::__private::missing_field_value("notes")?
                }
            };
            let __value_recent = match __fields.recent {
                ::core::option::Option::Some(__value) => __value,
                ::core::option::Option::None => {
                    ::agentstate::__private::missing_field_value("recent")?
                }
            };
            let __value_findings = match __fields.findings {
                ::core::option::Option::Some(__value) => __value,
                ::core::option::Option::None => {
                    ::agentstate::__private::missing_field_value("findings")?
                }
            };
            let __value_cache = match __fields.cache {
                ::core::option::Option::Some(__value) => __value,
                ::core::option::Option::None => ::agentstate::__private::missing_field("cache")?,
            };
            let __value_title = match __fields.title {
                ::core::option::Option::Some(__value) => __value,
                ::core::option::Option::None => {
                    ::agentstate::__private::missing_field_value("title")?
                }
            };
            let __value_base =
                <AgentState as ::agentstate::state::DeserializeFields<'de>>::finish(__fields.base)?;
            ::core::result::Result::Ok(Research {
                notes: __value_notes,
                recent: __value_recent,
                findings: __value_findings,
                base: __value_base,
                cache: __value_cache,
                title: __value_title,
            })
        }
    }
    #[automatically_derived]
    impl<'de> ::agentstate::__private::serde::Deserialize<'de> for Research
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        Vec<String>: ::agentstate::__private::FieldValue,
        Vec<u32>: ::agentstate::__private::FieldValue,
        Vec<Finding>: ::agentstate::__private::FieldValue,
        String: ::agentstate::__private::FieldValue,
    {
        fn deserialize<__D: ::agentstate::__private::serde::Deserializer<'de>>(
            __deserializer: __D,
        ) -> ::core::result::Result<Self, __D::Error> {
            const __SHAPE: ::agentstate::__private::Shape = ::agentstate::__private::Shape {
                name: "Research",
                fields: &["notes", "recent", "findings", "cache", "title"],
                base: true,
                deny_unknown_fields: false,
                expecting: "struct Research",
            };
            ::agentstate::__private::deserialize_state(__deserializer, &__SHAPE)
        }
    }
};
#[doc = "A partial update of [`Research`]: each field is `None` (left alone) or the value merged through that field's reducer. Generated by `#[derive(AgentState)]`."]
#[derive(:: core :: fmt :: Debug, :: core :: clone :: Clone)]
pub struct ResearchUpdate
where
    for<'__agentstate> AgentState: ::agentstate::State,
    for<'__agentstate> <AgentState as ::agentstate::State>::Update:
        ::agentstate::__private::FieldTraits,
{
    #[doc = "Merged into `notes` with `append`; `None` leaves the field alone."]
    pub notes: ::core::option::Option<Vec<String>>,
    #[doc = "Merged into `recent` with `bounded_append`; `None` leaves the field alone."]
    pub recent: ::core::option::Option<Vec<u32>>,
    #[doc = "Merged into `findings` with `merge_by_key`; `None` leaves the field alone."]
    pub findings: ::core::option::Option<Vec<Finding>>,
    #[doc = "Updates of the base state `AgentState`; in JSON its fields sit beside this state's own."]
    pub base: <AgentState as ::agentstate::State>::Update,
    #[doc = "Merged into `title` with `last_write_wins`; `None` leaves the field alone."]
    pub title: ::core::option::Option<String>,
    #[doc = "Overwrites: each replaces its field, bypassing the field's reducer (an update's ordinary entry for the field then merges on top). In JSON `{\"field\": {\"__overwrite__\": value}}`."]
    pub overwrite: ResearchUpdateOverwrite,
}
const _: () = {
    #[doc(hidden)]
    #[automatically_derived]
    impl<'de> ::agentstate::state::DeserializeFields<'de> for ResearchUpdate
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        Vec<String>: ::agentstate::__private::FieldValue,
        Vec<u32>: ::agentstate::__private::FieldValue,
        Vec<Finding>: ::agentstate::__private::FieldValue,
        String: ::agentstate::__private::FieldValue,
    {
        type Fields = Self;
        #[inline]
        fn deserialize_field<__A: ::agentstate::__private::serde::de::MapAccess<'de>>(
            __fields: &mut Self,
            __key: &str,
            __map: &mut __A,
        ) -> ::core::result::Result<bool, __A::Error> {
            match __key {
                "notes" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.notes,
                    "notes",
                    __map,
                ),
                "recent" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.recent,
                    "recent",
                    __map,
                ),
                "findings" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.findings,
                    "findings",
                    __map,
                ),
                "title" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.title,
                    "title",
                    __map,
                ),
                _ => {
                    if < ResearchUpdateOverwrite as :: agentstate :: state :: DeserializeFields < 'de > > :: deserialize_field (& mut __fields . overwrite , __key , __map) ? { return :: core :: result :: Result :: Ok (true) ; }
                    << AgentState as :: agentstate :: State > :: Update as :: agentstate :: state :: DeserializeFields < 'de > > :: deserialize_field (& mut __fields . base , __key , __map)
                }
            }
        }
        #[inline]
        fn finish<__E: ::agentstate::__private::serde::de::Error>(
            __fields: Self,
        ) -> ::core::result::Result<Self, __E> {
            ::core::result::Result::Ok(__fields)
        }
    }
    #[automatically_derived]
    impl<'de> ::agentstate::__private::serde::Deserialize<'de> for ResearchUpdate
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        Vec<String>: ::agentstate::__private::FieldValue,
        Vec<u32>: ::agentstate::__private::FieldValue,
        Vec<Finding>: ::agentstate::__private::FieldValue,
        String: ::agentstate::__private::FieldValue,
    {
        fn deserialize<__D: ::agentstate::__private::serde::Deserializer<'de>>(
            __deserializer: __D,
        ) -> ::core::result::Result<Self, __D::Error> {
            const __SHAPE: ::agentstate::__private::Shape = ::agentstate::__private::Shape {
                name: "ResearchUpdate",
                fields: &["notes", "recent", "findings", "title"],
                base: true,
                deny_unknown_fields: false,
                expecting: "struct ResearchUpdate",
            };
            ::agentstate::__private::deserialize_state(__deserializer, &__SHAPE)
        }
    }
};
#[automatically_derived]
impl ::agentstate::__private::serde::Serialize for ResearchUpdate
where
    for<'__agentstate> AgentState: ::agentstate::State,
    for<'__agentstate> <AgentState as ::agentstate::State>::Update:
        ::agentstate::__private::FieldTraits,
    Vec<String>: ::agentstate::__private::FieldValue,
    Vec<u32>: ::agentstate::__private::FieldValue,
    Vec<Finding>: ::agentstate::__private::FieldValue,
    String: ::agentstate::__private::FieldValue,
{
    fn serialize<__S: ::agentstate::__private::serde::Serializer>(
        &self,
        __serializer: __S,
    ) -> ::core::result::Result<__S::Ok, __S::Error> {
        let mut __map = ::agentstate::__private::serde::Serializer::serialize_map(
            __serializer,
            ::core::option::Option::None,
        )?;
        ::agentstate::__private::serialize_entry(
            &mut __map,
            "notes",
            &::agentstate::__private::value(&self.notes),
        )?;
        ::agentstate::__private::serialize_entry(
            &mut __map,
            "recent",
            &::agentstate::__private::value(&self.recent),
        )?;
        ::agentstate::__private::serialize_entry(
            &mut __map,
            "findings",
            &::agentstate::__private::value(&self.findings),
        )?;
        ::agentstate::__private::serialize_flattened(&mut __map, &self.base)?;
        ::agentstate::__private::serialize_entry(
            &mut __map,
            "title",
            &::agentstate::__private::value(&self.title),
        )?;
        ::agentstate::__private::serialize_entry(
            &mut __map,
            "notes.__overwrite__",
            &::agentstate::__private::value(&self.overwrite.notes),
        )?;
        ::agentstate::__private::serialize_entry(
            &mut __map,
            "recent.__overwrite__",
            &::agentstate::__private::value(&self.overwrite.recent),
        )?;
        ::agentstate::__private::serialize_entry(
            &mut __map,
            "findings.__overwrite__",
            &::agentstate::__private::value(&self.overwrite.findings),
        )?;
        ::agentstate::__private::serialize_entry(
            &mut __map,
            "title.__overwrite__",
            &::agentstate::__private::value(&self.overwrite.title),
        )?;
        ::agentstate::__private::serde::ser::SerializeMap::end(__map)
    }
}
#[automatically_derived]
impl ::core::cmp::PartialEq for ResearchUpdate
where
    for<'__agentstate> AgentState: ::agentstate::State,
    for<'__agentstate> <AgentState as ::agentstate::State>::Update:
        ::agentstate::__private::FieldTraits,
    Vec<String>: ::agentstate::__private::FieldValue,
    Vec<u32>: ::agentstate::__private::FieldValue,
    Vec<Finding>: ::agentstate::__private::FieldValue,
    String: ::agentstate::__private::FieldValue,
{
    #[inline]
    fn eq(&self, __other: &Self) -> bool {
        true && ::agentstate::__private::option_eq(&self.notes, &__other.notes)
            && ::agentstate::__private::option_eq(&self.recent, &__other.recent)
            && ::agentstate::__private::option_eq(&self.findings, &__other.findings)
            && self.base == __other.base
            && ::agentstate::__private::option_eq(&self.title, &__other.title)
            && self.overwrite == __other.overwrite
    }
}
#[doc = "The overwrites of a [`ResearchUpdate`]: each field, when set, replaces the state's field, bypassing its reducer."]
#[derive(:: core :: fmt :: Debug, :: core :: clone :: Clone)]
pub struct ResearchUpdateOverwrite
where
    for<'__agentstate> AgentState: ::agentstate::State,
    for<'__agentstate> <AgentState as ::agentstate::State>::Update:
        ::agentstate::__private::FieldTraits,
{
    #[doc = "Replaces `notes` with this value, bypassing its reducer `append`."]
    pub notes: ::core::option::Option<Vec<String>>,
    #[doc = "Replaces `recent` with this value, bypassing its reducer `bounded_append`."]
    pub recent: ::core::option::Option<Vec<u32>>,
    #[doc = "Replaces `findings` with this value, bypassing its reducer `merge_by_key`."]
    pub findings: ::core::option::Option<Vec<Finding>>,
    #[doc = "Replaces `title` with this value, bypassing its reducer `last_write_wins`."]
    pub title: ::core::option::Option<String>,
}
const _: () = {
    #[doc(hidden)]
    #[automatically_derived]
    impl<'de> ::agentstate::state::DeserializeFields<'de> for ResearchUpdateOverwrite
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        Vec<String>: ::agentstate::__private::FieldValue,
        Vec<u32>: ::agentstate::__private::FieldValue,
        Vec<Finding>: ::agentstate::__private::FieldValue,
        String: ::agentstate::__private::FieldValue,
    {
        type Fields = Self;
        #[inline]
        fn deserialize_field<__A: ::agentstate::__private::serde::de::MapAccess<'de>>(
            __fields: &mut Self,
            __key: &str,
            __map: &mut __A,
        ) -> ::core::result::Result<bool, __A::Error> {
            match __key {
                "notes.__overwrite__" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.notes,
                    "notes.__overwrite__",
                    __map,
                ),
                "recent.__overwrite__" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.recent,
                    "recent.__overwrite__",
                    __map,
                ),
                "findings.__overwrite__" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.findings,
                    "findings.__overwrite__",
                    __map,
                ),
                "title.__overwrite__" => ::agentstate::__private::deserialize_field_value(
                    &mut __fields.title,
                    "title.__overwrite__",
                    __map,
                ),
                _ => ::core::result::Result::Ok(false),
            }
        }
        #[inline]
        fn finish<__E: ::agentstate::__private::serde::de::Error>(
            __fields: Self,
        ) -> ::core::result::Result<Self, __E> {
            ::core::result::Result::Ok(__fields)
        }
    }
    #[automatically_derived]
    impl<'de> ::agentstate::__private::serde::Deserialize<'de> for ResearchUpdateOverwrite
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        Vec<String>: ::agentstate::__private::FieldValue,
        Vec<u32>: ::agentstate::__private::FieldValue,
        Vec<Finding>: ::agentstate::__private::FieldValue,
        String: ::agentstate::__private::FieldValue,
    {
        fn deserialize<__D: ::agentstate::__private::serde::Deserializer<'de>>(
            __deserializer: __D,
        ) -> ::core::result::Result<Self, __D::Error> {
            const __SHAPE: ::agentstate::__private::Shape = ::agentstate::__private::Shape {
                name: "ResearchUpdateOverwrite",
                fields: &[
                    "notes.__overwrite__",
                    "recent.__overwrite__",
                    "findings.__overwrite__",
                    "title.__overwrite__",
                ],
                base: false,
                deny_unknown_fields: false,
                expecting: "struct ResearchUpdateOverwrite",
            };
            ::agentstate::__private::deserialize_state(__deserializer, &__SHAPE)
        }
    }
};
#[automatically_derived]
impl ::agentstate::__private::serde::Serialize for ResearchUpdateOverwrite
where
    for<'__agentstate> AgentState: ::agentstate::State,
    for<'__agentstate> <AgentState as ::agentstate::State>::Update:
        ::agentstate::__private::FieldTraits,
    Vec<String>: ::agentstate::__private::FieldValue,
    Vec<u32>: ::agentstate::__private::FieldValue,
    Vec<Finding>: ::agentstate::__private::FieldValue,
    String: ::agentstate::__private::FieldValue,
{
    fn serialize<__S: ::agentstate::__private::serde::Serializer>(
        &self,
        __serializer: __S,
    ) -> ::core::result::Result<__S::Ok, __S::Error> {
        let mut __state = ::agentstate::__private::serde::Serializer::serialize_struct(
            __serializer,
            "ResearchUpdateOverwrite",
            0 + self.notes.is_some() as usize
                + self.recent.is_some() as usize
                + self.findings.is_some() as usize
                + self.title.is_some() as usize,
        )?;
        ::agentstate::__private::serialize_field(
            &mut __state,
            "notes.__overwrite__",
            &::agentstate::__private::value(&self.notes),
        )?;
        ::agentstate::__private::serialize_field(
            &mut __state,
            "recent.__overwrite__",
            &::agentstate::__private::value(&self.recent),
        )?;
        ::agentstate::__private::serialize_field(
            &mut __state,
            "findings.__overwrite__",
            &::agentstate::__private::value(&self.findings),
        )?;
        ::agentstate::__private::serialize_field(
            &mut __state,
            "title.__overwrite__",
            &::agentstate::__private::value(&self.title),
        )?;
        ::agentstate::__private::serde::ser::SerializeStruct::end(__state)
    }
}
#[automatically_derived]
impl ::core::cmp::PartialEq for ResearchUpdateOverwrite
where
    for<'__agentstate> AgentState: ::agentstate::State,
    for<'__agentstate> <AgentState as ::agentstate::State>::Update:
        ::agentstate::__private::FieldTraits,
    Vec<String>: ::agentstate::__private::FieldValue,
    Vec<u32>: ::agentstate::__private::FieldValue,
    Vec<Finding>: ::agentstate::__private::FieldValue,
    String: ::agentstate::__private::FieldValue,
{
    #[inline]
    fn eq(&self, __other: &Self) -> bool {
        true && ::agentstate::__private::option_eq(&self.notes, &__other.notes)
            && ::agentstate::__private::option_eq(&self.recent, &__other.recent)
            && ::agentstate::__private::option_eq(&self.findings, &__other.findings)
            && ::agentstate::__private::option_eq(&self.title, &__other.title)
    }
}
const _: () = {
    #[automatically_derived]
    impl ::core::default::Default for ResearchUpdate
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
    {
        fn default() -> Self {
            Self {
                notes: ::core::option::Option::None,
                recent: ::core::option::Option::None,
                findings: ::core::option::Option::None,
                base: ::core::default::Default::default(),
                title: ::core::option::Option::None,
                overwrite: ::core::default::Default::default(),
            }
        }
    }
    #[automatically_derived]
    impl ::core::default::Default for ResearchUpdateOverwrite
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
    {
        fn default() -> Self {
            Self {
                notes: ::core::option::Option::None,
                recent: ::core::option::Option::None,
                findings: ::core::option::Option::None,
                title: ::core::option::Option::None,
            }
        }
    }
    impl ResearchUpdate
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
    {
        #[doc = "Sets the value merged into `notes` (with `append`)."]
        #[must_use]
        pub fn notes(mut self, value: impl ::agentstate::update::IntoField<Vec<String>>) -> Self {
            self.notes =
                ::core::option::Option::Some(::agentstate::update::IntoField::into_field(value));
            self
        }
        #[doc = "Replaces `notes` with this value, bypassing its reducer `append`."]
        #[must_use]
        pub fn overwrite_notes(
            mut self,
            value: impl ::agentstate::update::IntoField<Vec<String>>,
        ) -> Self {
            self.overwrite.notes =
                ::core::option::Option::Some(::agentstate::update::IntoField::into_field(value));
            self
        }
        #[doc = "Sets the value merged into `recent` (with `bounded_append`)."]
        #[must_use]
        pub fn recent(mut self, value: impl ::agentstate::update::IntoField<Vec<u32>>) -> Self {
            self.recent =
                ::core::option::Option::Some(::agentstate::update::IntoField::into_field(value));
            self
        }
        #[doc = "Replaces `recent` with this value, bypassing its reducer `bounded_append`."]
        #[must_use]
        pub fn overwrite_recent(
            mut self,
            value: impl ::agentstate::update::IntoField<Vec<u32>>,
        ) -> Self {
            self.overwrite.recent =
                ::core::option::Option::Some(::agentstate::update::IntoField::into_field(value));
            self
        }
        #[doc = "Sets the value merged into `findings` (with `merge_by_key`)."]
        #[must_use]
        pub fn findings(
            mut self,
            value: impl ::agentstate::update::IntoField<Vec<Finding>>,
        ) -> Self {
            self.findings =
                ::core::option::Option::Some(::agentstate::update::IntoField::into_field(value));
            self
        }
        #[doc = "Replaces `findings` with this value, bypassing its reducer `merge_by_key`."]
        #[must_use]
        pub fn overwrite_findings(
            mut self,
            value: impl ::agentstate::update::IntoField<Vec<Finding>>,
        ) -> Self {
            self.overwrite.findings =
                ::core::option::Option::Some(::agentstate::update::IntoField::into_field(value));
            self
        }
        #[doc = "Sets the update of the base state (`base`)."]
        #[must_use]
        pub fn base(
            mut self,
            value: impl ::agentstate::update::IntoField<<AgentState as ::agentstate::State>::Update>,
        ) -> Self {
            self.base = ::agentstate::update::IntoField::into_field(value);
            self
        }
        #[doc = "Sets the value merged into `title` (with `last_write_wins`)."]
        #[must_use]
        pub fn title(mut self, value: impl ::agentstate::update::IntoField<String>) -> Self {
            self.title =
                ::core::option::Option::Some(::agentstate::update::IntoField::into_field(value));
            self
        }
        #[doc = "Replaces `title` with this value, bypassing its reducer `last_write_wins`."]
        #[must_use]
        pub fn overwrite_title(
            mut self,
            value: impl ::agentstate::update::IntoField<String>,
        ) -> Self {
            self.overwrite.title =
                ::core::option::Option::Some(::agentstate::update::IntoField::into_field(value));
            self
        }
    }
    impl ResearchUpdate
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        for<'__agentstate> ResearchUpdate: ::agentstate::update::Update,
    {
        #[doc = r" Parses a JSON update strictly: unknown keys and values that do not fit are"]
        #[doc = r" `state_validation_error`s naming the field (see `agentstate::update::Update`)."]
        #[inline]
        pub fn from_json(
            value: ::agentstate::__private::serde_json::Value,
        ) -> ::core::result::Result<Self, ::agentstate::Error>
        where
            for<'__agentstate> Self: ::agentstate::__private::serde::de::DeserializeOwned,
        {
            <Self as ::agentstate::update::Update>::from_json(value)
        }
        #[doc = r" Parses a JSON update, ignoring and returning unknown keys."]
        #[inline]
        pub fn from_json_lenient(
            value: ::agentstate::__private::serde_json::Value,
        ) -> ::core::result::Result<
            (Self, ::std::vec::Vec<::std::string::String>),
            ::agentstate::Error,
        >
        where
            for<'__agentstate> Self: ::agentstate::__private::serde::de::DeserializeOwned,
        {
            <Self as ::agentstate::update::Update>::from_json_lenient(value)
        }
        #[doc = r" One update whose effect equals merging `self` then `next`."]
        #[inline]
        pub fn then(self, next: Self) -> ::core::result::Result<Self, ::agentstate::Error> {
            <Self as ::agentstate::update::Update>::then(self, next)
        }
    }
    #[automatically_derived]
    impl ::agentstate::update::Update for ResearchUpdate
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        for<'__agentstate> Research: ::agentstate::State<Update = ResearchUpdate>,
    {
        type State = Research;
        #[inline]
        fn prepare(&mut self) {
            <AgentState as ::agentstate::State>::prepare_update(&mut self.base);
        }
    }
    #[automatically_derived]
    impl ::agentstate::output::MessagesUpdate for ResearchUpdate
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
    {
        fn add_messages(&mut self, messages: ::std::vec::Vec<::agentstate::message::Message>) {
            ::agentstate::output::MessagesUpdate::add_messages(&mut self.base, messages);
        }
    }
    impl Research
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        ::agentstate::reducers::MergeByKey<()>:
            ::agentstate::reducers::Merges<Vec<Finding>, Update = Vec<Finding>>,
    {
        #[inline]
        fn __agentstate_reducer_findings() -> impl ::agentstate::reducers::Reducer<
            Vec<Finding>,
            Update = <::agentstate::reducers::MergeByKey<()> as ::agentstate::reducers::Merges<
                Vec<Finding>,
            >>::Update,
            Plan = <::agentstate::reducers::MergeByKey<()> as ::agentstate::reducers::Merges<
                Vec<Finding>,
            >>::Plan,
        > {
            ::agentstate::reducers::MergeByKey::new(
                ::agentstate::__private::by_field::<
                    <Vec<Finding> as ::agentstate::reducers::ListField>::Item,
                    _,
                    _,
                >(
                    |__item: &<Vec<Finding> as ::agentstate::reducers::ListField>::Item| &__item.id
                )
                .named("id"),
            )
        }
    }
    const _ : () = :: core :: assert ! (! :: agentstate :: __private :: contains (< AgentState as :: agentstate :: State > :: FIELDS , "notes") , "conflicting_reducers: field `notes` is already declared by the base state `AgentState`; an extension cannot declare it again") ;
    const _ : () = :: core :: assert ! (! :: agentstate :: __private :: contains (< AgentState as :: agentstate :: State > :: FIELDS , "recent") , "conflicting_reducers: field `recent` is already declared by the base state `AgentState`; an extension cannot declare it again") ;
    const _ : () = :: core :: assert ! (! :: agentstate :: __private :: contains (< AgentState as :: agentstate :: State > :: FIELDS , "findings") , "conflicting_reducers: field `findings` is already declared by the base state `AgentState`; an extension cannot declare it again") ;
    const _ : () = :: core :: assert ! (! :: agentstate :: __private :: contains (< AgentState as :: agentstate :: State > :: FIELDS , "title") , "conflicting_reducers: field `title` is already declared by the base state `AgentState`; an extension cannot declare it again") ;
    #[automatically_derived]
    impl ::core::ops::Deref for Research
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
    {
        type Target = AgentState;
        fn deref(&self) -> &AgentState {
            &self.base
        }
    }
    #[automatically_derived]
    impl ::core::ops::DerefMut for Research
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
    {
        fn deref_mut(&mut self) -> &mut AgentState {
            &mut self.base
        }
    }
    #[automatically_derived]
    impl ::agentstate::update::Extends<<AgentState as ::agentstate::State>::Update> for ResearchUpdate
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        AgentState: ::agentstate::update::Extensible,
    {
        fn base_update(&mut self) -> &mut <AgentState as ::agentstate::State>::Update {
            &mut self.base
        }
    }
    #[automatically_derived]
    impl ::agentstate::State for Research
    where
        for<'__agentstate> AgentState: ::agentstate::State,
        for<'__agentstate> <AgentState as ::agentstate::State>::Update:
            ::agentstate::__private::FieldTraits,
        ::agentstate::reducers::Append: ::agentstate::reducers::Reducer<Vec<String>>
            + ::agentstate::reducers::Merges<Vec<String>, Update = Vec<String>>,
        ::agentstate::reducers::BoundedAppend: ::agentstate::reducers::Reducer<Vec<u32>>
            + ::agentstate::reducers::Merges<Vec<u32>, Update = Vec<u32>>,
        ::agentstate::reducers::MergeByKey<()>:
            ::agentstate::reducers::Merges<Vec<Finding>, Update = Vec<Finding>>,
        AgentState: ::agentstate::State,
        ::agentstate::reducers::LastWriteWins: ::agentstate::reducers::Reducer<String>
            + ::agentstate::reducers::Merges<String, Update = String>,
    {
        type Update = ResearchUpdate;
        type Plan =
            (
                ::agentstate::__private::FieldPlan<
                    Vec<String>,
                    <::agentstate::reducers::Append as ::agentstate::reducers::Merges<
                        Vec<String>,
                    >>::Plan,
                >,
                ::agentstate::__private::FieldPlan<
                    Vec<u32>,
                    <::agentstate::reducers::BoundedAppend as ::agentstate::reducers::Merges<
                        Vec<u32>,
                    >>::Plan,
                >,
                ::agentstate::__private::FieldPlan<
                    Vec<Finding>,
                    <::agentstate::reducers::MergeByKey<()> as ::agentstate::reducers::Merges<
                        Vec<Finding>,
                    >>::Plan,
                >,
                <AgentState as ::agentstate::State>::Plan,
                ::agentstate::__private::FieldPlan<
                    String,
                    <::agentstate::reducers::LastWriteWins as ::agentstate::reducers::Merges<
                        String,
                    >>::Plan,
                >,
            );
        const FIELDS: &'static [&'static str] = {
            const __BASE: &[&str] = <AgentState as ::agentstate::State>::FIELDS;
            const __OWN: &[&str] = &["notes", "recent", "findings", "title"];
            const __LEN: usize = __BASE.len() + __OWN.len();
            const __ALL: [&str; __LEN] =
                ::agentstate::__private::concat_fields::<__LEN>(__BASE, __OWN);
            &__ALL
        };
        #[inline]
        fn plan(
            &self,
            __update: Self::Update,
        ) -> ::core::result::Result<Self::Plan, ::agentstate::Error> {
            ::core::result::Result::Ok((
                ::agentstate::__private::plan_field::<Vec<String>, _>(
                    "notes",
                    &::agentstate::reducers::Append,
                    &self.notes,
                    __update.overwrite.notes,
                    __update.notes,
                )?,
                ::agentstate::__private::plan_field::<Vec<u32>, _>(
                    "recent",
                    &::agentstate::reducers::BoundedAppend::__checked(3usize),
                    &self.recent,
                    __update.overwrite.recent,
                    __update.recent,
                )?,
                ::agentstate::__private::plan_field::<Vec<Finding>, _>(
                    "findings",
                    &Self::__agentstate_reducer_findings(),
                    &self.findings,
                    __update.overwrite.findings,
                    __update.findings,
                )?,
                ::agentstate::State::plan(&self.base, __update.base)?,
                ::agentstate::__private::plan_field::<String, _>(
                    "title",
                    &::agentstate::reducers::LastWriteWins,
                    &self.title,
                    __update.overwrite.title,
                    __update.title,
                )?,
            ))
        }
        #[inline]
        fn apply(&mut self, __plan: Self::Plan) {
            ::agentstate::__private::apply_field::<Vec<String>, _>(
                &::agentstate::reducers::Append,
                &mut self.notes,
                __plan.0,
            );
            ::agentstate::__private::apply_field::<Vec<u32>, _>(
                &::agentstate::reducers::BoundedAppend::__checked(3usize),
                &mut self.recent,
                __plan.1,
            );
            ::agentstate::__private::apply_field::<Vec<Finding>, _>(
                &Self::__agentstate_reducer_findings(),
                &mut self.findings,
                __plan.2,
            );
            ::agentstate::State::apply(&mut self.base, __plan.3);
            ::agentstate::__private::apply_field::<String, _>(
                &::agentstate::reducers::LastWriteWins,
                &mut self.title,
                __plan.4,
            );
        }
        #[inline]
        fn compose(
            __a: Self::Update,
            __b: Self::Update,
            __how: ::agentstate::update::Combine,
        ) -> ::core::result::Result<Self::Update, ::agentstate::Error> {
            let (__ow_notes, __u_notes) = ::agentstate::__private::compose_field(
                "notes",
                "append",
                false,
                __how,
                (__a.overwrite.notes, __a.notes),
                (__b.overwrite.notes, __b.notes),
                ::agentstate::__private::compose_with::<Vec<String>, _>(
                    "notes",
                    &::agentstate::reducers::Append,
                ),
            )?;
            let (__ow_recent, __u_recent) = ::agentstate::__private::compose_field(
                "recent",
                "bounded_append",
                false,
                __how,
                (__a.overwrite.recent, __a.recent),
                (__b.overwrite.recent, __b.recent),
                ::agentstate::__private::compose_with::<Vec<u32>, _>(
                    "recent",
                    &::agentstate::reducers::BoundedAppend::__checked(3usize),
                ),
            )?;
            let (__ow_findings, __u_findings) = ::agentstate::__private::compose_field(
                "findings",
                "merge_by_key",
                false,
                __how,
                (__a.overwrite.findings, __a.findings),
                (__b.overwrite.findings, __b.findings),
                ::agentstate::__private::compose_with::<Vec<Finding>, _>(
                    "findings",
                    &Self::__agentstate_reducer_findings(),
                ),
            )?;
            let (__ow_title, __u_title) = ::agentstate::__private::compose_field(
                "title",
                "last_write_wins",
                true,
                __how,
                (__a.overwrite.title, __a.title),
                (__b.overwrite.title, __b.title),
                ::agentstate::__private::compose_with::<String, _>(
                    "title",
                    &::agentstate::reducers::LastWriteWins,
                ),
            )?;
            ::core::result::Result::Ok(ResearchUpdate {
                notes: __u_notes,
                recent: __u_recent,
                findings: __u_findings,
                base: <AgentState as ::agentstate::State>::compose(__a.base, __b.base, __how)?,
                title: __u_title,
                overwrite: ResearchUpdateOverwrite {
                    notes: __ow_notes,
                    recent: __ow_recent,
                    findings: __ow_findings,
                    title: __ow_title,
                },
            })
        }
        #[inline]
        fn prepare_update(update: &mut Self::Update) {
            ::agentstate::update::Update::prepare(update)
        }
        #[inline]
        fn schema() -> ::agentstate::schema::Schema {
            let mut __fields = ::std::vec::Vec::new();
            ::core::iter::Extend::extend(
                &mut __fields,
                <AgentState as ::agentstate::State>::schema().into_fields(),
            );
            __fields.push(::agentstate::schema::FieldSchema::of(
                "notes",
                &::agentstate::reducers::Append,
            ));
            __fields.push(::agentstate::schema::FieldSchema::of(
                "recent",
                &::agentstate::reducers::BoundedAppend::__checked(3usize),
            ));
            __fields.push(::agentstate::schema::FieldSchema::of(
                "findings",
                &Self::__agentstate_reducer_findings(),
            ));
            __fields.push(::agentstate::schema::FieldSchema::of(
                "title",
                &::agentstate::reducers::LastWriteWins,
            ));
            ::agentstate::schema::Schema::describe(__fields)
        }
    }
};
