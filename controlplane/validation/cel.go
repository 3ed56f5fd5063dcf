package validation

import (
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// maxMatchConditions is upstream's limit per webhook or policy.
const maxMatchConditions = 64

// celCompiler compiles admission CEL as the plugins will, so a configuration whose expression
// cannot compile is refused when it is written rather than failing every request it matches.
var celCompiler = sync.OnceValue(func() plugincel.Compiler {
	return plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
})

// matchConditions validates a webhook's or policy's matchConditions as upstream: at most 64,
// unique qualified names, and expressions that compile to a bool (with params when the policy
// has a paramKind, and the authorizer). A compile error reads "compilation failed: …".
func matchConditions(conds []admissionregistrationv1.MatchCondition, fld *field.Path, hasParams bool) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > maxMatchConditions {
		errs = append(errs, field.TooMany(fld, len(conds), maxMatchConditions))
	}
	seen := sets.New[string]()
	for i, c := range conds {
		p := fld.Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case seen.Has(c.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		default:
			for _, msg := range validation.IsQualifiedName(c.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
			}
		}
		seen.Insert(c.Name)
		if c.Expression == "" {
			errs = append(errs, field.Required(p.Child("expression"), ""))
			continue
		}
		mc := matchconditions.MatchCondition(c)
		res := celCompiler().CompileCELExpression(&mc, plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true},
			environment.StoredExpressions)
		if res.Error != nil {
			errs = append(errs, field.Invalid(p.Child("expression"), c.Expression, res.Error.Error()))
		}
	}
	return errs
}
