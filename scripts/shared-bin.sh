# shared-bin.sh: sourced by the scripts that run a shared test server
# binary (tidb.sh, babelfish.sh). shared_bin prints the folder that holds
# them: $DBQ_SHARED_BIN, else shared/bin beside the checkout (beside the
# main checkout when this one is a git worktree).
shared_bin() {
	if [[ -n ${DBQ_SHARED_BIN:-} ]]; then
		printf '%s\n' "$DBQ_SHARED_BIN"
		return
	fi
	local repo common
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	if [[ ! -d $repo/../shared/bin ]] &&
		common=$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null) &&
		[[ -d $common/../../shared/bin ]]; then
		repo=$(cd "$common/.." && pwd) # a worktree: beside the main checkout
	fi
	printf '%s\n' "$(cd "$repo/.." && pwd)/shared/bin"
}
