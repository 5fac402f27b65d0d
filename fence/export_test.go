package fence

// SetFileStep sets the function that WriteFile and CheckFile call at each
// step of a write that changes files.
func SetFileStep(f func(step string)) { fileStep = f }

// FileSteps are the steps of a WriteFile that raises the recorded fence,
// in order.
var FileSteps = []string{
	"locked",
	"record temp created", "record temp written", "record temp synced", "record renamed", "record dir synced",
	"data temp created", "data temp written", "data temp synced", "data renamed", "data dir synced",
}
