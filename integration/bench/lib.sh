# What the benchmark scripts share: where they are, their --help and their option loop.
#
# Source it right after `set -euo pipefail`:
#
#   . "$(dirname "$0")/lib.sh"
#
# It sets $self (the script's absolute path) and $repo (the repository's root) and goes to
# $repo. A script's --help is its opening comment: the lines from its second to the one
# before `set -euo pipefail`, without their `# `.

self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
repo="$(cd "$(dirname "$self")/../.." && pwd)"
cd "$repo"

# bench_usage: print the script's opening comment.
bench_usage() {
    sed -n '2,/^set -e/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//'
}

# bench_help ARG...: print the opening comment and exit 0 when an argument is -h or --help;
# for scripts that hand every other argument to a program.
bench_help() {
    local _arg
    for _arg in "$@"; do
        case "$_arg" in
            -h|--help) bench_usage; exit 0 ;;
        esac
    done
}

# bench_options SPEC... -- ARG...: set the script's variables from its arguments, by SPEC:
#
#   --name:var        the option takes a value (`--name VALUE` or `--name=VALUE`), put in $var
#   --name:var=VALUE  a flag: sets $var to VALUE
#   --name:@array     the option and its value are appended to the array (for a program)
#   '*:@array'        any other argument is appended to the array as it is; without it, an
#                     unknown argument is an error (exit 2)
#
# -h and --help print the opening comment and exit 0.
bench_options() {
    local -a _specs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        _specs+=("$1")
        shift
    done
    shift
    local _arg _name _value _given _spec _target _rest
    while [ $# -gt 0 ]; do
        _arg=$1
        shift
        case "$_arg" in
            -h|--help) bench_usage; exit 0 ;;
        esac
        _name=${_arg%%=*}
        _given=0
        [ "$_name" = "$_arg" ] || { _value=${_arg#*=}; _given=1; }
        _target=
        _rest=
        for _spec in "${_specs[@]}"; do
            case "$_spec" in
                "$_name":*) _target=${_spec#*:} ;;
                '*:'*) _rest=${_spec#*:} ;;
            esac
        done
        if [ -z "$_target" ]; then
            [ -n "$_rest" ] || { echo "${self##*/}: unknown option $_arg (--help lists them)" >&2; exit 2; }
            eval "${_rest#@}+=(\"\$_arg\")"
            continue
        fi
        case "$_target" in
            *=*) printf -v "${_target%%=*}" '%s' "${_target#*=}"; continue ;;
        esac
        if [ "$_given" = 0 ]; then
            [ $# -gt 0 ] || { echo "${self##*/}: $_name needs a value (--help lists them)" >&2; exit 2; }
            _value=$1
            shift
        fi
        case "$_target" in
            @*) eval "${_target#@}+=(\"\$_name\" \"\$_value\")" ;;
            *) printf -v "$_target" '%s' "$_value" ;;
        esac
    done
}
